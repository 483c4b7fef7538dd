"""A FastAPI app that asks protectd about every request from its own
middleware, as docs/protectd.md shows: protectd counts the client's
address, or the consumer the app authenticated under its plan, and the app
copies the RateLimit fields to its answer and passes protectd's refusals
(status, Retry-After, problem+json body) to the client.

    PROTECTD_URL=http://127.0.0.1:8089 PORT=8000 /usr/bin/python3 main.py

protectd runs with HTTP_PROTECT_TRUSTED_PROXIES listing this app's address
(it is protectd's peer, and names the client and the consumer in headers),
and with the plans API_KEYS below name in HTTP_PROTECT_PLANS.
"""

import os
import socket

import httpx
import uvicorn
from fastapi import FastAPI, Request, Response

PROTECTD = os.environ.get("PROTECTD_URL", "http://127.0.0.1:8089") + "/verify"

# The app's own authentication: an API key names a consumer and its plan.
# Two keys of one customer are one consumer, so they share its limits. A
# real app looks keys up in its database.
API_KEYS = {
    "acme-key-1": ("acme", "pro"),
    "acme-key-2": ("acme", "pro"),
    "globex-key": ("globex", "pro"),
    "initech-key": ("initech", "trial"),
}

# The response fields protectd writes for the client.
COPIED = ("ratelimit", "ratelimit-policy", "retry-after", "cache-control", "x-content-type-options")

app = FastAPI()
# One client for every request: it keeps its connections to protectd open.
client = httpx.AsyncClient(timeout=2.0)


@app.middleware("http")
async def protect(request: Request, call_next):
    # request.client is the client as uvicorn's proxy_headers found it in
    # X-Forwarded-For from FORWARDED_ALLOW_IPS (the load balancer).
    headers = {"X-Forwarded-For": request.client.host if request.client else ""}
    user = API_KEYS.get(request.headers.get("x-api-key", ""))
    if user:
        headers["X-Protect-Consumer"] = user[0]  # an identifier, not the key
        headers["X-Protect-Plan"] = user[1]  # a name in HTTP_PROTECT_PLANS
    try:
        r = await client.get(PROTECTD, headers=headers)
    except httpx.HTTPError:
        # protectd down or slow: fail closed, as the shipped nginx config does.
        return Response(
            b'{"type":"about:blank","title":"Service Unavailable","status":503,"code":"unavailable"}\n',
            status_code=503,
            media_type="application/problem+json",
            headers={"Retry-After": "5", "Cache-Control": "no-store"},
        )
    copied = {h: r.headers[h] for h in COPIED if h in r.headers}
    if r.status_code != 200:
        return Response(
            r.content,
            status_code=r.status_code,
            media_type=r.headers.get("content-type", "application/problem+json"),
            headers=copied,
        )
    response = await call_next(request)
    response.headers.update(copied)
    return response


@app.get("/")
async def hello(request: Request):
    return {"hello": request.client.host if request.client else None}


def main():
    # PORT=0 picks a free port; the line printed names it (the tests read it).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(os.environ.get("PORT", "8000"))))
    sock.listen(128)  # connections wait in the backlog until uvicorn serves
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        app,
        proxy_headers=True,
        forwarded_allow_ips=os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
        log_level="warning",
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
