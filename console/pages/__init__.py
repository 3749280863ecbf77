"""The console's pages, one module each, rendered on request from the broker's state.

Each page function takes the broker (what `ConsoleBroker` describes) and the request's
query, reads what it shows at that moment, and returns the page. Nothing here runs
unless a page is asked for: the console keeps no state and no task of its own.

Lists are paginated (PAGE_SIZE rows) and searchable, so a page costs the same at 10
topics and at 1,000 topics of 10,000 partitions: a pass over names to filter them, then
work for the rows shown only.
"""
