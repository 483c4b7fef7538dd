package protect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// ErrBadPenalty is wrapped by the error of Penalize when n is not
// positive. Nothing is counted then: a penalty of 0 would be a Check, and a
// negative one would let a caller pay a client's failures back.
var ErrBadPenalty = errors.New("protect: bad penalty")

// Penalize counts n failures for r's client: a wrong password, a bad
// signature, a probe of a path that does not exist. It resolves the
// client exactly as Verify does (behind TrustedProxies only; a forged
// X-Forwarded-For from anyone else names nobody but the forger), then
// counts n in one atomic store step (one round trip on Redis) and, when
// the count passes BanLimit, writes a ban that escalates as every
// automatic ban does. Unknown and safe clients are answered as Verify
// answers them and never counted; a banned client is not counted further.
//
// Under a plan (Config.Plan, or a consumer's from ConsumerFunc) n is the
// cost charged to it, as VerifyConsumerN charges it: a plan charges
// nothing it refuses, while the stream beside Config.Plan counts n
// regardless, for BanLimit. Consumers are never banned automatically.
//
// The Decision describes the client after counting: Allowed, Limited once
// past MaxRequests, Banned when this penalty (or an earlier one) banned
// it. If no response is written yet, it can answer the request in hand
// (d.Refused, d.WriteResponse): a 429, or a 403 when this penalty banned
// the client.
//
// A ban written here is an ordinary ban: listed, inspected and lifted by
// protectctl and logged through slog. Its reason is the protector's: with
// Config.CountStatus set, "failures passed the ban limit of N", since
// that protector counts nothing but failures; otherwise the usual
// "stream passed the ban limit of N requests", since its counter then
// holds requests and penalties together.
//
// n below 1 is an error wrapping ErrBadPenalty, with the zero Decision,
// and nothing is counted. As with Verify, the error is otherwise non-nil
// only when ctx ended before the store answered; a client that hangs up
// cancels r.Context(), so pass context.WithoutCancel(r.Context()) when the
// client may already have seen the outcome (StoreTimeout still bounds the
// call).
func (p *Protector) Penalize(ctx context.Context, r *http.Request, n int64) (Decision, error) {
	if n < 1 {
		return Decision{}, fmt.Errorf("%w: n is %d; want 1 or more", ErrBadPenalty, n)
	}
	return p.penalize(ctx, r, n)
}

// penalize counts n failures for r: Penalize, and Middleware under
// CountStatus.
func (p *Protector) penalize(ctx context.Context, r *http.Request, n int64) (Decision, error) {
	d, err := p.request(ctx, r, n)
	p.stats.stripe(d.hint()).penalties.Add(uint64(n))
	return d, err
}

// failuresReason is the reason of the automatic bans of a protector that
// counts failures (Config.CountStatus).
func failuresReason(banLimit int64) string {
	return "failures passed the ban limit of " + strconv.FormatInt(banLimit, 10)
}
