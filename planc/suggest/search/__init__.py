"""`planc suggest --search`: the fastest plan that fits, found by cost and proved by
compiling it. The rooms, in the order a search runs:

- `workload`: what the step asks (tokens, optimizer state, the model's shape);
- `space`: the candidates (mesh factorizations, ZeRO-1, remat, slots on the host);
- `score`: each candidate's analytic peak and step time;
- `prove`: the best compiled for the topology (JAX; imported only with a step);
- `searcher`: the flow: the topology and chip, score, prove, choose;
- `report`: the rows a reviewer reads, as comment tables and JSON.
"""

from planc.suggest.search.report import Row
from planc.suggest.search.searcher import (MARGIN, MAX_CANDIDATES, MAX_COMPILES, SearchResult,
                                           search)

__all__ = ["search", "SearchResult", "Row", "MARGIN", "MAX_COMPILES", "MAX_CANDIDATES"]
