"""The README says the OpenAPI page says what each of /passages' own parameters does (issue 57 item 5: `variant`,
`alpha` and `sigma` had no description)."""

from __future__ import annotations

from service.schema import PassageRequest, SearchRequest


def test_every_passage_parameter_is_described() -> None:
    props = PassageRequest.model_json_schema()["properties"]
    own = sorted(set(PassageRequest.model_fields) - set(SearchRequest.model_fields))
    assert {"variant", "alpha", "beta", "sigma", "rho"} <= set(own)
    undescribed = [name for name in own if len(props[name].get("description", "")) < 20]
    assert undescribed == []


def test_every_variant_is_named_in_the_description() -> None:
    from typing import get_args

    from service.schema import Variant

    text = PassageRequest.model_json_schema()["properties"]["variant"]["description"]
    assert [v for v in get_args(Variant) if f"'{v}'" not in text] == []
