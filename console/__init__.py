"""What an operator reads and steers over HTTP, beside the broker: the admin endpoint
(`admin_http.py`: /healthz, /metrics, /faults; `access.py`: who signs in to it and to the
schema registry) and the web console. `ottla serve` (tools/serve.py) runs it beside the
broker; broker/ does not import it: the console reads the broker through `ConsoleBroker`
(pages/common.py).

The web console: pages served on the admin endpoint (`/console`) that show
what exactly-once looks like in this broker: open transactions and the LSO they hold
back, aborted records, producer ids and their sequences, groups and their lag.

- `app.py`: the routes, the two changes (create, delete a topic) and what each page asks of
  a signed-in principal; `view.py`: the broker as that principal may see it;
- `pages.py`: each page, rendered from the broker's state when asked for;
- `records.py`: a partition's records in bounded slices, marked committed/aborted/open;
- `html.py`: escaping, the layout, tables, pagination; `params.py`: bounded query values;
- `static/`: the one script and style sheet (package data, no build step);
- `command.py`: `ottla console`.

Not to be confused with tools/console.py, the `ottla produce` / `ottla consume`
command-line producer and consumer.
"""
