package redisstore

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/redis/go-redis/v9"
)

// luaComment matches a Lua comment to the end of its line: the scripts
// hold no string with "--" in it.
var luaComment = regexp.MustCompile(`--.*`)

// Each idea of lua/prelude.lua is written there once and in no script,
// so that a fix to it reaches every script; a new script file is held to
// the same.
func TestLuaPreludeIdeasOnce(t *testing.T) {
	marks := []struct{ idea, mark string }{
		{"Redis' clock", "redis.call('TIME')"},
		{"the limits' parse", "(%-?%d+)"},
		{"the escalating ban's length", "math.pow("},
		{"the offense record", "'ZCARD'"},
		{"the ban record's format", "%d|%d|%d|"},
		{"the automatic ban record", "auto"},
		{"the index entry", "'ZADD', index"},
		{"the index sweep", "'ZRANGEBYSCORE', index"},
		{"the journal's entry", "'kind', kind"},
	}
	files, err := filepath.Glob("lua/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("filepath.Glob(lua/*.lua) = %v, %v; want the scripts", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code := luaComment.ReplaceAllString(string(b), "")
		want := 0
		if filepath.Base(f) == "prelude.lua" {
			want = 1
		}
		for _, m := range marks {
			if got := len(regexp.MustCompile(regexp.QuoteMeta(m.mark)).FindAllStringIndex(code, -1)); got != want {
				t.Errorf("count(%s, %q) = %d, want %d (%s belongs in prelude.lua, once)", f, m.mark, got, want, m.idea)
			}
		}
	}
}

// Every script carries the prelude, and only the scripts' own text
// follows it: the embedded files are the scripts Redis runs.
func TestLuaScriptsCarryPrelude(t *testing.T) {
	for _, s := range []struct {
		name string
		src  string
		hash string
	}{
		{"take", takeLua, takeScript.Hash()},
		{"plan", planLua, planScript.Hash()},
		{"ban", banLua, banScript.Hash()},
		{"unban", unbanLua, unbanScript.Hash()},
		{"inspect", inspectLua, inspectScript.Hash()},
		{"ranges", rangesLua, rangesScript.Hash()},
		{"sweep", sweepLua, sweepScript.Hash()},
		{"events", eventsLua, eventsScript.Hash()},
	} {
		if got, want := s.hash, newScript(s.src).Hash(); got != want || preludeLua == "" {
			t.Errorf("%sScript.Hash() = %s, want %s (prelude.lua + %s.lua)", s.name, got, want, s.name)
		}
	}
	if got, want := eventsAllScript.Hash(), redis.NewScript(crossSlot+preludeLua+eventsAllLua).Hash(); got != want {
		t.Errorf("eventsAllScript.Hash() = %s, want %s (the shebang, prelude.lua + eventsall.lua)", got, want)
	}
}

// A limits text that does not parse is an error before the script writes
// anything that would help the client: with a bad head no count is made,
// and with a bad tail (read only for a ban) the request that should ban
// fails with its counter kept, so the next one is past the limit again
// rather than counted from nothing.
func TestTakeScriptMalformedLimits(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			ctx := t.Context()
			c := dial(target.Addr(t))
			t.Cleanup(func() { c.Close() })
			base := uniqueNamespace(t, c) + "{k}"
			counter := base + ":c"
			take := func(limits string) (any, error) {
				t.Helper()
				return takeScript.Run(ctx, c, []string{base}, 1, limits).Result()
			}
			if got, err := take("x|2|1000|2|86400000|86400000|1000|1000|r"); err == nil {
				t.Fatalf("take(bad head) = %v, nil; want an error", got)
			}
			if n, err := c.Exists(ctx, counter).Result(); err != nil || n != 0 {
				t.Fatalf("EXISTS %s after take(bad head) = %d, %v; want 0, nil", counter, n, err)
			}
			const badTail = "60000|2|1000|two|86400000|86400000|1000|1000|r"
			for want := int64(1); want <= 2; want++ {
				if got, err := take(badTail); err != nil || got != want {
					t.Fatalf("take(bad tail) #%d = %v, %v; want %d, nil (within the limit the tail is not read)", want, got, err, want)
				}
			}
			for i := 3; i <= 4; i++ {
				if got, err := take(badTail); err == nil {
					t.Fatalf("take(bad tail) #%d = %v, nil; want an error (the ban cannot be written)", i, got)
				}
				if got, err := c.Get(ctx, counter).Int64(); err != nil || got != int64(i) {
					t.Fatalf("GET %s after take(bad tail) #%d = %d, %v; want %d, nil (kept)", counter, i, got, err, i)
				}
			}
		})
	}
}
