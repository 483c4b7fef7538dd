package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/nftsink"
)

// nftResult is the -json of nft sync.
type nftResult struct {
	Sets         string `json:"sets"`
	Added        int    `json:"added"`
	Deleted      int    `json:"deleted"`
	Kept         int    `json:"kept"`
	Pending      int    `json:"pending"`
	Transactions int    `json:"transactions"`
}

// nftCmd is "nft sync": one pass of protectd's nftables sink, for cron or
// for a host whose protectd runs elsewhere.
func nftCmd(fs *flag.FlagSet) func(*cli, []string) error {
	sets := fs.String("sets", "", `the sets, "FAMILY TABLE SET4 SET6" (default $HTTP_PROTECT_NFT, or "inet protect ban4 ban6")`)
	create := fs.Bool("create", false, "create the table and the sets when missing (the chain that drops is yours to write)")
	asJSON := fs.Bool("json", false, "write the outcome as JSON")
	return func(c *cli, args []string) error {
		if len(args) != 1 || args[0] != "sync" {
			return usagef("nft takes one subcommand, sync; got %q", args)
		}
		spec := *sets
		if spec == "" {
			spec = os.Getenv("HTTP_PROTECT_NFT")
		}
		if strings.TrimSpace(spec) == "" {
			spec = "true"
		}
		opts, on, err := nftsink.ParseSpec(spec)
		if err != nil {
			return usageError{err}
		}
		if !on {
			return usagef("the sets %q are off: give -sets FAMILY TABLE SET4 SET6", spec)
		}
		rb, ok := c.svc.(redisBackend)
		if !ok || len(rb.Lists()) == 0 {
			return usagef("nft sync reads the bans from the store: give -redis; a service on the memory store keeps its own sets (HTTP_PROTECT_NFT)")
		}
		lists := rb.Lists()
		opts.Create = *create
		opts.Clock = lists[0].Protector().Config().Clock
		sink, err := nftsink.Open(opts)
		if err != nil {
			return err
		}
		defer sink.Close()
		ctx, cancel := c.ctx()
		defer cancel()
		var bans []protect.Ban
		for _, a := range lists {
			b, err := a.Bans(ctx, admin.Filter{})
			if err != nil {
				return fmt.Errorf("%w\n  check -redis or HTTP_PROTECT_REDIS_URL", err)
			}
			bans = append(bans, b...)
		}
		res, err := sink.Sync(ctx, bans)
		if err != nil {
			return err
		}
		out := nftResult{Sets: opts.String(), Added: res.Added, Deleted: res.Deleted, Kept: res.Kept, Pending: res.Pending, Transactions: res.Transactions}
		if *asJSON {
			return c.writeJSON(out)
		}
		_, err = fmt.Fprintf(c.stdout, "%s: %d added, %d deleted, %d kept, %d pending, in %d transactions\n",
			out.Sets, out.Added, out.Deleted, out.Kept, out.Pending, out.Transactions)
		return err
	}
}
