package hooktest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// t stands in for the *testing.T a real test receives.
var t = &testing.T{}

// A message:received hook that suppresses spam, tested in three lines.
func Example_observer() {
	suppressSpam := hooks.Handle(hooks.MessageReceived, "suppress_spam",
		func(_ context.Context, c *hooks.MessageReceivedContext) error {
			if strings.Contains(c.Envelope.Body, "spam") {
				c.Suppress = true
			}
			return nil
		})

	reg := hooktest.NewRegistry(t, suppressSpam)
	c := hooktest.MessageReceived("buy spam now")
	hooktest.Emit(t, reg, hooks.MessageReceived, c)

	fmt.Println("suppressed:", c.Suppress)
	// Output: suppressed: true
}

// An enrichment hook adds an item to the user turn.
func Example_collector() {
	enrichTime := hooks.Handle(hooks.MessageEnrich, "time",
		func(_ context.Context, c *hooks.MessageEnrichContext) error {
			c.AddMetadata("time", "2026-03-23T10:00:00Z")
			return nil
		})

	reg := hooktest.NewRegistry(t, enrichTime)
	c := hooktest.MessageEnrich("what time is it?")
	hooktest.Emit(t, reg, hooks.MessageEnrich, c)

	fmt.Println(len(c.Items), c.Items[0].Key, c.Items[0].CachePolicy)
	// Output: 1 time volatile
}

// Transformers chain: each hook gets the draft the previous one produced.
func Example_transformer() {
	footer := hooks.Handle(hooks.MessageBeforeResponse, "footer",
		func(_ context.Context, c *hooks.BeforeResponseContext) error {
			c.Draft.Text += "\n-- Footer"
			return nil
		})

	reg := hooktest.NewRegistry(t, footer)
	c := hooktest.BeforeResponse("Hello")
	hooktest.Emit(t, reg, hooks.MessageBeforeResponse, c)

	fmt.Printf("%q\n", c.Draft.Text)
	// Output: "Hello\n-- Footer"
}

// A gate declines a tool call; the model gets the reason.
func Example_gate() {
	guard := hooks.Handle(hooks.ToolBeforeCall, "no_secrets",
		func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
			var args struct{ Path string }
			if err := c.DecodeArguments(&args); err != nil {
				return err
			}
			if strings.Contains(args.Path, "secret") {
				c.Decline("Sensitive files must stay unread.")
			}
			return nil
		}, hooks.WithFailurePolicy(hooks.FailClosed))

	reg := hooktest.NewRegistry(t, guard)
	c := hooktest.ToolBeforeCall("read_file", `{"path":"/srv/secret.txt"}`)
	hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)

	fmt.Println(c.Declined, c.DeclineReason)
	// Output: true Sensitive files must stay unread.
}

// A claim hook answers instead of the model.
func Example_claim() {
	ping := hooks.Handle(hooks.MessageClaim, "ping",
		func(_ context.Context, c *hooks.MessageClaimContext) error {
			if c.Envelope.Body == "ping" {
				c.Claim("pong")
			}
			return nil
		})

	reg := hooktest.NewRegistry(t, ping)
	c := hooktest.MessageClaim("ping")
	hooktest.Emit(t, reg, hooks.MessageClaim, c)

	fmt.Println(c.Claimed.Text)
	// Output: pong
}

// Services records what hooks asked the host to do.
func ExampleServices() {
	var svc hooktest.Services
	welcome := hooks.Handle(hooks.RoomMemberJoined, "welcome",
		func(ctx context.Context, c *hooks.RoomMemberContext) error {
			_, err := c.SendMessage(ctx, c.RoomID, "Welcome, "+string(c.UserID)+"!", nil)
			return err
		})

	reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("lobby", welcome)}, hooks.Options{Services: svc.Bind()})
	hooktest.Emit(t, reg, hooks.RoomMemberJoined, hooktest.MemberJoined("@bob:localhost"))

	for _, m := range svc.Sent() {
		fmt.Println(m.Plugin, m.Event, m.Depth, m.Text)
	}
	// Output: lobby room:member_joined 1 Welcome, @bob:localhost!
}
