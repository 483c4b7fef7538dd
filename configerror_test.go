package protect

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestConfigErrorsAtOnce: New reports every problem of a Config in one
// error, each a *ConfigError naming its field, and Validate finds the
// same without making a protector.
func TestConfigErrorsAtOnce(t *testing.T) {
	cfg := Config{
		TTL:            -time.Second,
		BanFactor:      0.5,
		StoreTimeout:   time.Nanosecond,
		IPv4Prefix:     40,
		TrustedProxies: []string{"10.0.0.1/8"},
		SafeNetworks:   []string{"garbage"},
	}
	want := []string{"BanFactor", "IPv4Prefix", "SafeNetworks", "StoreTimeout", "TTL", "TrustedProxies"}
	for name, err := range map[string]error{"Validate": cfg.Validate(), "New": func() error { _, err := New(cfg); return err }()} {
		if !errors.Is(err, ErrConfig) {
			t.Fatalf("%s(%+v) = %v, want an error wrapping ErrConfig", name, cfg, err)
		}
		var fields []string
		var walk func(error)
		walk = func(err error) {
			if ce, ok := err.(*ConfigError); ok {
				fields = append(fields, ce.Field)
				return
			}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					walk(e)
				}
			}
		}
		walk(err)
		slices.Sort(fields)
		if !slices.Equal(fields, want) {
			t.Errorf("%s(%+v) = fields %q (%v), want %q", name, cfg, fields, err, want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("Config{}.Validate() = %v, want nil", err)
	}
	e := &ConfigError{Field: "BanFactor", Value: "0.5", Reason: "must be a number of at least 1"}
	if got, want := e.Error(), "protect: bad config: BanFactor 0.5: must be a number of at least 1"; got != want {
		t.Fatalf("ConfigError.Error() = %q, want %q", got, want)
	}
}
