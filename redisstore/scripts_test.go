package redisstore

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
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
		{"the index prune", "- 60000"},
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
	} {
		if got, want := s.hash, newScript(s.src).Hash(); got != want || preludeLua == "" {
			t.Errorf("%sScript.Hash() = %s, want %s (prelude.lua + %s.lua)", s.name, got, want, s.name)
		}
	}
}
