package matrixio_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
)

func TestAppServiceRegistration(t *testing.T) {
	tests := []struct {
		name      string
		opts      matrixio.AppServiceOptions
		wantRegex string
		covers    []id.UserID
		notCovers []id.UserID
	}{{
		name: "exact list",
		opts: matrixio.AppServiceOptions{ServerName: "example.org", SenderLocalpart: "router",
			Localparts: []string{"router", "code.review", "assistant"}},
		wantRegex: `^@(?:assistant|code\.review|router):example\.org$`,
		covers:    []id.UserID{"@router:example.org", "@assistant:example.org", "@code.review:example.org"},
		notCovers: []id.UserID{"@codexreview:example.org", "@assistant2:example.org", "@xassistant:example.org",
			"@assistant:example.org.evil", "@assistant:other.org"},
	}, {
		name: "prefix",
		opts: matrixio.AppServiceOptions{ID: "hr-prod", ServerName: "chat.example.org:8448", SenderLocalpart: "hr_router",
			Localparts: []string{"hr_assistant"}, UserPrefix: "hr_"},
		wantRegex: `^@hr_.*:chat\.example\.org:8448$`,
		covers:    []id.UserID{"@hr_router:chat.example.org:8448", "@hr_later:chat.example.org:8448"},
		notCovers: []id.UserID{"@router:chat.example.org:8448", "@hr_x:example.org"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := matrixio.NewAppServiceRegistration(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Namespaces.Users) != 1 || !r.Namespaces.Users[0].Exclusive || r.Namespaces.Users[0].Regex != tt.wantRegex {
				t.Errorf("users namespace = %+v, want exclusive %s", r.Namespaces.Users, tt.wantRegex)
			}
			for _, u := range tt.covers {
				if !r.Covers(u) {
					t.Errorf("%s is not covered", u)
				}
			}
			for _, u := range tt.notCovers {
				if r.Covers(u) {
					t.Errorf("%s is covered", u)
				}
			}
			wantID := tt.opts.ID
			if wantID == "" {
				wantID = matrixio.DefaultAppServiceID
			}
			if r.ID != wantID || r.SenderLocalpart != tt.opts.SenderLocalpart || r.URL != nil || r.RateLimited {
				t.Errorf("registration = %+v", r)
			}
			hexToken := regexp.MustCompile(`^[0-9a-f]{64}$`)
			if !hexToken.MatchString(r.ASToken) || !hexToken.MatchString(r.HSToken) || r.ASToken == r.HSToken {
				t.Errorf("tokens are not two different 32-byte random values")
			}

			// The file as the homeservers read it.
			data, err := r.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			var file map[string]any
			if err := yaml.Unmarshal(data, &file); err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			url, hasURL := file["url"]
			if !hasURL || url != nil {
				t.Errorf("url = %v (present %v), want null", url, hasURL)
			}
			ns := file["namespaces"].(map[string]any)
			users := ns["users"].([]any)[0].(map[string]any)
			if file["as_token"] != r.ASToken || file["hs_token"] != r.HSToken || file["sender_localpart"] != tt.opts.SenderLocalpart ||
				file["id"] != wantID || file["rate_limited"] != false || users["exclusive"] != true || users["regex"] != tt.wantRegex {
				t.Errorf("file:\n%s", data)
			}
			if a, ok := ns["aliases"].([]any); !ok || len(a) != 0 {
				t.Errorf("aliases = %v, want an empty list", ns["aliases"])
			}
			if !strings.HasPrefix(string(data), "# hookroom's application service registration.") {
				t.Errorf("file lacks its explanation:\n%s", data)
			}
		})
	}
}

func TestAppServiceRegistrationReusesTokens(t *testing.T) {
	opts := matrixio.AppServiceOptions{ServerName: "example.org", SenderLocalpart: "router", ASToken: "as-secret", HSToken: "hs-secret"}
	r, err := matrixio.NewAppServiceRegistration(opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.ASToken != "as-secret" || r.HSToken != "hs-secret" {
		t.Errorf("tokens were not reused")
	}
	a, _ := r.Marshal()
	again, _ := matrixio.NewAppServiceRegistration(opts)
	if b, _ := again.Marshal(); string(a) != string(b) {
		t.Errorf("the same options gave two files:\n%s\n%s", a, b)
	}
	// Only the missing one is generated.
	opts.HSToken = ""
	if r, err = matrixio.NewAppServiceRegistration(opts); err != nil || r.ASToken != "as-secret" || len(r.HSToken) != 64 {
		t.Errorf("with only as_token: %v", err)
	}
}

func TestAppServiceRegistrationErrors(t *testing.T) {
	tests := []struct {
		name string
		opts matrixio.AppServiceOptions
		want string
	}{
		{"no server name", matrixio.AppServiceOptions{SenderLocalpart: "router"}, `"" is not a valid server name`},
		{"no sender", matrixio.AppServiceOptions{ServerName: "example.org"}, `"" is not a valid localpart`},
		{"bad localpart", matrixio.AppServiceOptions{ServerName: "example.org", SenderLocalpart: "router", Localparts: []string{"Bob"}}, `"Bob" is not a valid localpart`},
		{"outside the prefix", matrixio.AppServiceOptions{ServerName: "example.org", SenderLocalpart: "hr_router", UserPrefix: "hr_", Localparts: []string{"bob"}},
			`localpart "bob" does not start with the user prefix "hr_"`},
		{"same tokens", matrixio.AppServiceOptions{ServerName: "example.org", SenderLocalpart: "router", ASToken: "t", HSToken: "t"}, "must differ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := matrixio.NewAppServiceRegistration(tt.opts)
			if !errors.Is(err, matrixio.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want ErrInvalidConfig with %q", err, tt.want)
			}
		})
	}
}

func TestRegistrationString(t *testing.T) {
	for _, tt := range []struct {
		r    matrixio.Registration
		want string
	}{
		{matrixio.Registration{AppServiceToken: "as-secret", SharedSecret: "s"}, "appservice"},
		{matrixio.Registration{SharedSecret: "s", Token: "t"}, "shared-secret"},
		{matrixio.Registration{Token: "t"}, "registration-token"},
		{matrixio.Registration{}, "none"},
	} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%s, want %s", got, tt.want)
		}
	}
}
