package matrixio

import (
	"testing"

	"maunium.net/go/mautrix/id"
)

// SpaceSpec aliases must be this homeserver's to be created: EnsureSpace
// refuses others before any request (parseAlias is the shared check).
func TestSpaceAliasParsing(t *testing.T) {
	tests := []struct {
		alias  string
		local  string
		server string
		ok     bool
	}{
		{"#hookroom-space:example.org", "hookroom-space", "example.org", true},
		{"#space:other.org", "space", "other.org", true},
		{"hookroom-space", "", "", false},
		{"#:example.org", "", "", false},
		{"#space", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.alias, func(t *testing.T) {
			local, server, ok := parseAlias(id.RoomAlias(tt.alias))
			if local != tt.local || server != tt.server || ok != tt.ok {
				t.Errorf("parseAlias(%q) = %q, %q, %v; want %q, %q, %v", tt.alias, local, server, ok, tt.local, tt.server, tt.ok)
			}
		})
	}
}
