"""`ottla console`: print the web console's address and open it in a browser.

    ottla console [--admin-url http://127.0.0.1:9644] [--no-browser]

The console is served by the broker on its admin endpoint (`ottla serve --admin-port
9644`); this command only checks that the endpoint answers, prints the address and,
where the machine has a browser (the `webbrowser` module finds one, or $BROWSER names
one), opens it. Without a browser (a server, a container, CI) the address is printed
and that is all: never an error.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
import webbrowser

DEFAULT_ADMIN_URL = "http://127.0.0.1:9644"
# How long the endpoint may take to answer /healthz before the address counts as wrong.
HEALTH_CHECK_TIMEOUT_SECONDS = 5


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("console", help="open the web console (served on the broker's admin endpoint)")
    # No OTTLA_* variable for it: those are broker settings, and `ottla serve` warns of any it does not know.
    p.add_argument("--admin-url", default=DEFAULT_ADMIN_URL,
                   help=f"the broker's admin endpoint (default {DEFAULT_ADMIN_URL})")
    p.add_argument("--no-browser", action="store_true", help="print the address only")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    base = args.admin_url.rstrip("/")
    url = f"{base}/console/"
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=HEALTH_CHECK_TIMEOUT_SECONDS):
            pass
    except urllib.error.HTTPError:
        pass  # it answers (503 while stopping): the address is right
    except (OSError, ValueError) as exc:
        print(f"ottla console: no admin endpoint at {base} ({exc}); start the broker with "
              "`ottla serve --admin-port 9644` or give --admin-url", file=sys.stderr)
        return 1
    print(f"Ottla console: {url}", flush=True)
    if not args.no_browser:
        try:
            opened = webbrowser.open(url)
        except Exception:  # a broken browser setup is no reason to fail: the address is printed
            opened = False
        if not opened:
            print("(no browser found here: open the address above)", file=sys.stderr)
    return 0
