package envconfig

import (
	"strings"
	"testing"
)

func TestEscalationEnv(t *testing.T) {
	env := []string{
		"HTTP_PROTECT_ESCALATION_THRESHOLD=4",
		"HTTP_PROTECT_IPV6_ESCALATION=none",
		"HTTP_PROTECT_IPV4_ESCALATION=24, /20",
	}
	c, err := Read(env, Options{})
	if err != nil || c.EscalationThreshold != 4 || c.IPv6Escalation == nil || len(c.IPv6Escalation) != 0 || len(c.IPv4Escalation) != 2 || c.IPv4Escalation[1] != 20 {
		t.Fatalf("Read(env) = %+v, %v; want EscalationThreshold 4, IPv6Escalation empty, IPv4Escalation of 2 ending in 20", c, err)
	}
	env[1] = "HTTP_PROTECT_IPV6_ESCALATION=56;48"
	if _, err := Read(env, Options{}); err == nil || !strings.Contains(err.Error(), `"56;48"`) {
		t.Fatalf("Read(IPV6_ESCALATION=56;48) = %v, want an error quoting the list", err)
	}
}
