package hooks_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// A hook fetches the attachments of the message it handles, and nothing
// else: not another message's, not by editing its own envelope, not from
// events without an envelope.
func TestAttachmentHelperIsScopedToTheMessage(t *testing.T) {
	const (
		mine   = "mxc://localhost/mine"
		theirs = "mxc://localhost/theirs"
	)
	var svc hooktest.Services
	svc.AddAttachment(hooktest.Room, hooktest.EventID, hooks.Attachment{ID: mine, Kind: "image", Name: "cat.png", MimeType: "image/png", Data: []byte("png")})
	svc.AddAttachment(hooktest.Room, "$other:localhost", hooks.Attachment{ID: theirs, Kind: "file", Name: "secret.txt", Data: []byte("secret")})

	type result struct {
		att *hooks.Attachment
		err error
	}
	results := map[string]result{}
	fetch := func(key string, c interface {
		Attachment(context.Context, string) (*hooks.Attachment, error)
	}, ctx context.Context, id string) {
		att, err := c.Attachment(ctx, id)
		results[key] = result{att, err}
	}
	reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p",
		hooks.Handle(hooks.MessageEnrich, "enrich", func(ctx context.Context, c *hooks.MessageEnrichContext) error {
			fetch("own", c, ctx, mine)
			fetch("other message", c, ctx, theirs)
			// Editing the hook's copy of the envelope does not widen what it may fetch.
			c.Envelope.AttachmentIDs = append(c.Envelope.AttachmentIDs, theirs)
			fetch("after editing the envelope", c, ctx, theirs)
			return nil
		}),
		hooks.Handle(hooks.MessageReceived, "received", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
			fetch("message without attachments", c, ctx, mine)
			return nil
		}),
		hooks.Handle(hooks.ReactionReceived, "reaction", func(ctx context.Context, c *hooks.ReactionReceivedContext) error {
			fetch("event without an envelope", c, ctx, mine)
			return nil
		}),
	)}, hooks.Options{Services: svc.Bind()})

	c := hooktest.MessageEnrich("what is this?")
	c.Envelope.AttachmentIDs = []string{mine}
	hooktest.Emit(t, reg, hooks.MessageEnrich, c)
	hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hello"))
	hooktest.Emit(t, reg, hooks.ReactionReceived, &hooks.ReactionReceivedContext{RoomID: hooktest.Room, EventID: hooktest.EventID, Key: "👍"})

	if r := results["own"]; r.err != nil || r.att == nil || string(r.att.Data) != "png" || r.att.Name != "cat.png" || r.att.Size != 3 {
		t.Errorf("own attachment = %+v, %v", r.att, r.err)
	}
	for _, key := range []string{"other message", "after editing the envelope", "message without attachments", "event without an envelope"} {
		if r, ok := results[key]; !ok || r.att != nil || !errors.Is(r.err, hooks.ErrNotFound) {
			t.Errorf("%s: got %+v, %v; want ErrNotFound", key, r.att, r.err)
		}
	}

	// Without the service bound, the helper says so.
	unbound := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p",
		hooks.Handle(hooks.MessageEnrich, "enrich", func(ctx context.Context, c *hooks.MessageEnrichContext) error {
			fetch("unbound", c, ctx, mine)
			return nil
		}))})
	hooktest.Emit(t, unbound, hooks.MessageEnrich, c)
	if r := results["unbound"]; !errors.Is(r.err, hooks.ErrNoService) {
		t.Errorf("unbound: %v, want ErrNoService", r.err)
	}
}
