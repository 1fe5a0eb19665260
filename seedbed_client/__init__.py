"""A command-line client for Seedbed's JSON API (/api/v1/), standard library only (PyYAML for YAML configs).

    SEEDBED_URL=http://HOST:PORT SEEDBED_TOKEN=sb_... python -m seedbed_client COMMAND
    (--url / --token override the environment; a token: `python manage.py api_token USERNAME
    [--scope read|read-write] [--expires-days N|never]` or the API tokens page at /account/tokens/; a read token
    runs the list and get commands only, every token stops at its expiry)

Commands:
    runs list [--project P] [--status S]          id, name, project, status, step/total
    runs launch CONFIG.yaml [--project P] [--name N] [--queue Q]
    runs get ID                                   the run as JSON
    runs kill ID [--reason R]
    runs resume ID
    runs watch ID [--interval SECONDS]            progress bar until it ends; exit 0 if it succeeded
    sweeps launch CONFIG.yaml --seeds 4 [--concurrency 2] [--pack 0] [--policy median] [--project P] [--name N]
    sweeps list [--project P]
    sweeps get ID
    sweeps policies                               the early-stopping rules and their parameters
    evals list [--project P]
    evals get ID
    datasets list [--project P]
    datasets upload FILE --name N [--project P] [--prompt-field F] [--answer-field F]
    datasets get ID                               columns, first rows, mapping and split as JSON
    projects list
    projects create NAME
    projects add-member NAME USERNAME ROLE        ROLE: viewer, member or admin

CONFIG.yaml is the same mapping as a config of `python -m training run` (YAML, or JSON in a .json file).
Exit codes: 0 done; 1 a watched run did not succeed; 2 bad input (a 400's `error: FIELD: message` lines, a bad
config file, SEEDBED_URL/SEEDBED_TOKEN not set, a redirect to another host, port or scheme, refused so the token
is not sent there); 3 token refused (401: unknown, revoked or expired, the server's reason printed); 4 forbidden
(a read token's write, a role too low), not found or conflict (403/404/409); 5 server unreachable; 130 Ctrl-C (a
watched run goes on). A request over the token's rate (429) is sent again after the server's Retry-After (at most
3 times, 60 s each) before it is an error.
"""
from .client import ApiError, RedirectRefused, SeedbedClient, Unreachable

__all__ = ["ApiError", "RedirectRefused", "SeedbedClient", "Unreachable"]
