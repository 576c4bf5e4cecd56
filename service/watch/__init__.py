"""Prior-art watches: saved searches that report what each new generation of the index brings (issue 34).

- :mod:`service.watch.models`: the request and response bodies (``POST /watches``, hits, the Atom feed's entries);
- :mod:`service.watch.store`: the watches, their evaluations and hits, durable in SQLite (WAL) in a state folder
  beside the index folder (``PRIORART_STATE_DIR``), never inside it;
- :mod:`service.watch.evaluate`: the evaluation of every watch against the documents a generation brought;
- :mod:`service.watch.feed`: a watch's hits as an Atom feed;
- :mod:`service.watch.runner`: a server's background evaluation of each generation it loads.
"""
