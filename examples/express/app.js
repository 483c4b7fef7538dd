// An Express app that asks protectd about every request from its own
// middleware, as docs/protectd.md shows: protectd counts the client's
// address, or the consumer the app authenticated under its plan, and the
// app copies the RateLimit fields to its answer and passes protectd's
// refusals (status, Retry-After, problem+json body) to the client.
//
//   PROTECTD_URL=http://127.0.0.1:8089 PORT=3000 node app.js
//
// protectd runs with HTTP_PROTECT_TRUSTED_PROXIES listing this app's
// address (it is protectd's peer, and names the client and the consumer
// in headers), and with the plans API_KEYS below name in
// HTTP_PROTECT_PLANS.
"use strict";

const express = require("express");

const protectd = (process.env.PROTECTD_URL || "http://127.0.0.1:8089") + "/verify";

// The app's own authentication: an API key names a consumer and its
// plan. Two keys of one customer are one consumer, so they share its
// limits. A real app looks keys up in its database.
const API_KEYS = {
  "acme-key-1": { consumer: "acme", plan: "pro" },
  "acme-key-2": { consumer: "acme", plan: "pro" },
  "globex-key": { consumer: "globex", plan: "pro" },
  "initech-key": { consumer: "initech", plan: "trial" },
};

// The response fields protectd writes for the client.
const COPIED = ["ratelimit", "ratelimit-policy", "retry-after", "cache-control", "x-content-type-options"];

const app = express();
// The client's address comes from the load balancer in front, here on
// loopback; set this to your proxies' addresses, never to true (a
// client would then pick its own address).
app.set("trust proxy", process.env.TRUST_PROXY || "loopback");

app.use(async (req, res, next) => {
  const headers = { "X-Forwarded-For": req.ip };
  const user = API_KEYS[req.get("X-Api-Key")];
  if (user) {
    headers["X-Protect-Consumer"] = user.consumer; // an identifier, not the key
    headers["X-Protect-Plan"] = user.plan; // a name in HTTP_PROTECT_PLANS
  }
  let r;
  try {
    r = await fetch(protectd, { headers, signal: AbortSignal.timeout(2000) });
  } catch {
    // protectd down or slow: fail closed, as the shipped nginx config does.
    return res.status(503).set({ "Retry-After": "5", "Cache-Control": "no-store" })
      .type("application/problem+json")
      .send(Buffer.from(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503, code: "unavailable" }) + "\n"));
  }
  for (const h of COPIED) if (r.headers.has(h)) res.set(h, r.headers.get(h));
  if (r.status !== 200) {
    return res.status(r.status).type(r.headers.get("content-type") || "application/problem+json").send(Buffer.from(await r.arrayBuffer()));
  }
  next();
});

app.get("/", (req, res) => {
  res.json({ hello: req.ip, instance: process.env.INSTANCE || "" });
});

const server = app.listen(Number(process.env.PORT || 3000), "127.0.0.1", () => {
  // The test reads this line for the port (PORT=0 picks a free one).
  console.log(`listening on ${server.address().port}`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
