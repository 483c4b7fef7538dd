package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// allowCmd is "allow [-for DURATION] [-reason TEXT] [-by WHO] [-json] TARGET...".
func allowCmd(fs *flag.FlagSet) func(*cli, []string) error {
	var length time.Duration
	fs.Var(durationFlag{&length}, "for", "how long the entry lasts, e.g. 1h, 2d (default until disallowed)")
	reason := fs.String("reason", "", fmt.Sprintf("why, recorded with the entry (at most %d bytes)", protect.MaxReasonLen))
	by := fs.String("by", defaultBy(), "who allows, recorded with the entry")
	asJSON := fs.Bool("json", false, `write {"allowed": [...], "lifted": [...]} as JSON`)
	return func(c *cli, args []string) error {
		if len(args) == 0 {
			return usagef("allow needs at least one TARGET (an address or a CIDR)")
		}
		if len(*reason) > protect.MaxReasonLen {
			return usagef("-reason: %d bytes; a reason holds at most %d", len(*reason), protect.MaxReasonLen)
		}
		ctx, cancel := c.ctx()
		defer cancel()
		res, err := c.svc.Allow(ctx, args, admin.AllowOptions{For: length, Reason: *reason, By: *by})
		if err != nil {
			if len(res.Allowed) > 0 { // what was allowed before the failure
				if werr := c.writeBans(res.Allowed, *asJSON); werr != nil {
					return werr
				}
			}
			return err
		}
		if *asJSON {
			return c.writeJSON(res)
		}
		if err := c.writeBans(res.Allowed, false); err != nil {
			return err
		}
		if len(res.Lifted) > 0 {
			keys := make([]string, len(res.Lifted))
			for i, r := range res.Lifted {
				keys[i] = r.Key
			}
			fmt.Fprintf(c.stderr, "protectctl: lifted %d bans it covers: %s\n", len(keys), strings.Join(keys, ", "))
		}
		return nil
	}
}

// allowsCmd is "allows [-json]".
func allowsCmd(fs *flag.FlagSet) func(*cli, []string) error {
	asJSON := fs.Bool("json", false, "write JSON ([] when there are none)")
	return func(c *cli, args []string) error {
		if len(args) > 0 {
			return usagef("allows takes no arguments, got %q", args)
		}
		ctx, cancel := c.ctx()
		defer cancel()
		recs, err := c.svc.Allows(ctx)
		if err != nil {
			return err
		}
		return c.writeBans(recs, *asJSON)
	}
}

// disallowCmd is "disallow [-json] TARGET...".
func disallowCmd(fs *flag.FlagSet) func(*cli, []string) error {
	asJSON := fs.Bool("json", false, "write the entries removed as JSON")
	return func(c *cli, args []string) error {
		if len(args) == 0 {
			return usagef("disallow needs at least one TARGET (an address or a CIDR)")
		}
		ctx, cancel := c.ctx()
		defer cancel()
		recs, err := c.svc.Disallow(ctx, args)
		if err != nil {
			return err
		}
		if len(recs) == 0 && !*asJSON {
			fmt.Fprintln(c.stderr, "protectctl: nothing was allowed there")
			return nil
		}
		return c.writeBans(recs, *asJSON)
	}
}

func (r *remote) Allow(ctx context.Context, targets []string, o admin.AllowOptions) (admin.AllowResult, error) {
	req := admin.AllowRequest{Targets: targets, Reason: o.Reason, By: o.By}
	if o.For != 0 {
		req.For = o.For.String()
	}
	var out admin.AllowResult
	return out, r.do(ctx, "POST", "/v1/allows", url.Values{}, req, http.StatusCreated, &out)
}

func (r *remote) Allows(ctx context.Context) ([]admin.BanRecord, error) {
	var out []admin.BanRecord
	return out, r.do(ctx, "GET", "/v1/allows", url.Values{}, nil, http.StatusOK, &out)
}

func (r *remote) Disallow(ctx context.Context, targets []string) ([]admin.BanRecord, error) {
	var out []admin.BanRecord
	return out, r.do(ctx, "DELETE", "/v1/allows", url.Values{"target": targets}, nil, http.StatusOK, &out)
}

// Allow, Allows and Disallow are the allowlist of the service's own list.
func (b redisBackend) Allow(ctx context.Context, targets []string, o admin.AllowOptions) (admin.AllowResult, error) {
	return b.writer.Allow(ctx, targets, o)
}

func (b redisBackend) Allows(ctx context.Context) ([]admin.BanRecord, error) {
	return b.writer.Allows(ctx)
}

func (b redisBackend) Disallow(ctx context.Context, targets []string) ([]admin.BanRecord, error) {
	return b.writer.Disallow(ctx, targets)
}
