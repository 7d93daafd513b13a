package bot

import (
	"slices"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
)

func TestVerifyDecision(t *testing.T) {
	const admin, other = id.UserID("@admin:example.org"), id.UserID("@bob:example.org")
	tests := []struct {
		name   string
		mode   string
		from   id.UserID
		want   matrixio.VerifyDecision
		reason string
	}{
		{"default admits an admin", "", admin, matrixio.VerifyAccept, ""},
		{"admins admits an admin", config.VerificationAdmins, admin, matrixio.VerifyAccept, ""},
		{"admins refuses others", config.VerificationAdmins, other, matrixio.VerifyRefuse, verifyNotAdminReason},
		{"default refuses others", "", other, matrixio.VerifyRefuse, verifyNotAdminReason},
		{"off refuses an admin", config.VerificationOff, admin, matrixio.VerifyRefuse, verifyOffReason},
		{"off refuses others", config.VerificationOff, other, matrixio.VerifyRefuse, verifyOffReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{}
			cfg.Matrix.Encryption.Verification = tt.mode
			cfg.Authorization.GlobalUsers = []id.UserID{admin}
			got, reason := verifyDecision(&world{cfg: cfg}, tt.from)
			if got != tt.want || reason != tt.reason {
				t.Errorf("verifyDecision = %v %q, want %v %q", got, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestSpaceSpec(t *testing.T) {
	tests := []struct {
		name   string
		space  *config.Space
		admins []id.UserID
		ok     bool
		want   matrixio.SpaceSpec
	}{
		{"off", nil, nil, false, matrixio.SpaceSpec{}},
		{"defaults", &config.Space{}, []id.UserID{"@a:example.org"}, true,
			matrixio.SpaceSpec{Alias: "#hookroom-space:example.org", Name: "hookroom", Invite: []id.UserID{"@a:example.org"}}},
		{"localpart and patterns left out", &config.Space{Name: "Team", Alias: "team"}, []id.UserID{"@a:example.org", "@*:example.org", "@ops-?:example.org"}, true,
			matrixio.SpaceSpec{Alias: "#team:example.org", Name: "Team", Invite: []id.UserID{"@a:example.org"}}},
		{"full alias", &config.Space{Alias: "#root:example.org"}, nil, true,
			matrixio.SpaceSpec{Alias: "#root:example.org", Name: "hookroom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{}
			cfg.Matrix.ServerName = "example.org"
			cfg.Matrix.Space = tt.space
			cfg.Authorization.GlobalUsers = tt.admins
			got, ok := spaceSpec(&world{cfg: cfg})
			if ok != tt.ok || got.Alias != tt.want.Alias || got.Name != tt.want.Name || !slices.Equal(got.Invite, tt.want.Invite) {
				t.Errorf("spaceSpec = %+v %v, want %+v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	w := &world{joined: map[hooks.AgentName][]id.RoomID{
		hooks.RouterName: {"!b:x", "!a:x"},
		"helper":         {"!a:x", "!c:x"},
	}}
	if got := spaceRooms(w); !slices.Equal(got, []id.RoomID{"!a:x", "!b:x", "!c:x"}) {
		t.Errorf("spaceRooms = %v", got)
	}
}
