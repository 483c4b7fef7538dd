package main

import (
	"strings"
	"testing"
)

// A blank admin token, from -token or the environment, is a usage
// error naming where it came from; nothing is sent.
func TestBlankAdminToken(t *testing.T) {
	for _, tc := range []struct {
		env  *string // nil: unset
		args []string
		want string
	}{
		{ptr(""), nil, "protectctl: HTTP_PROTECT_ADMIN_TOKEN is set but blank: give the admin API's token, or unset it"},
		{ptr(strings.Repeat(" ", 16)), nil, "protectctl: HTTP_PROTECT_ADMIN_TOKEN is set but blank: give the admin API's token, or unset it"},
		{nil, []string{"-token", "  \t"}, "protectctl: -token is set but blank: give the admin API's token, or unset it"},
	} {
		if tc.env != nil {
			t.Setenv(envAdminToken, *tc.env)
		}
		var out, errb strings.Builder
		args := append(append([]string{"-server", "http://127.0.0.1:1"}, tc.args...), "bans")
		code := run(args, &out, &errb)
		if got := strings.SplitN(errb.String(), "\n", 2)[0]; code != 2 || got != tc.want {
			t.Errorf("protectctl %q (token %q) = exit %d, %q; want exit 2, %q", args, ptrs(tc.env), code, errb.String(), tc.want)
		}
	}
}

func ptr(s string) *string { return &s }

func ptrs(p *string) string {
	if p == nil {
		return "<unset>"
	}
	return *p
}
