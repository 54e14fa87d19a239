"""CPU per request of the gateway's own request path, in process, against canned upstream answers.

``tollgate bench`` measures whole processes over real sockets, on a shared machine, where a
difference of 0.1 ms per request is within the noise of one run. This tool takes the network and the
HTTP server away: it builds the real application (``create_asgi_app``: the request record, the
deadlines, the fast path, the routes, the billed call, the relay, a real ledger on SQLite) and calls
it as uvicorn would, with the upstream's answers canned in memory — the same bytes as the benchmark's
fast upstream sends, handed to the adapters as aiohttp would — and reports ``time.process_time`` per
request (the ledger's writer thread included) over thousands of requests, alternating the cases in
rounds so that whatever else the machine does hits them alike.

A stream's upstream frames come either all in one read (``burst``: as the benchmark's fast upstream
sends them, and as a loaded gateway finds them) or one per read, with the event loop turning between
reads (``apart``: as a provider generating token by token sends them).

    python -m scripts.relay_cost [--requests 2000] [--rounds 5] [--concurrency 1] [--cases chat,chat_stream]
"""

# canned.py: the upstream's answers and the measured cases; driver.py: the gateway built and called as
# uvicorn calls it; relay_only.py: ``--part relay``; run.py: the rounds, the report and the command line.
