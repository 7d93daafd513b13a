package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
)

// testMessage is a bot (never run) whose downloads come from files (by mxc
// URI), and the envelope it builds for a person's message with content.
func testMessage(t *testing.T, content string, files map[string][]byte, limits config.Attachments) (*Bot, hooks.Envelope) {
	t.Helper()
	cfg := &config.Config{
		Agents:      map[string]config.Agent{"helper": {Model: "m"}},
		Models:      map[string]config.Model{"m": {Provider: config.ProviderOpenAI, Model: "x"}},
		Attachments: limits,
	}
	cfg.ApplyDefaults()
	b := &Bot{}
	b.state.Store(&world{cfg: cfg, specs: map[string]agents.ModelSpec{"m": {}}})
	b.services = &hostServices{b: b}
	b.fetchMedia = func(_ context.Context, ref matrixio.MediaRef, limit int64) ([]byte, error) {
		data, ok := files[ref.URI.String()]
		switch {
		case !ok:
			return nil, errors.New("M_NOT_FOUND")
		case int64(len(data)) > limit:
			return nil, matrixio.ErrMediaTooLarge
		}
		return data, nil
	}
	var c event.Content
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.ParseRaw(event.EventMessage); err != nil {
		t.Fatal(err)
	}
	ev := &event.Event{ID: "$msg", RoomID: "!room", Sender: "@alice:hs", Type: event.EventMessage, Content: c}
	return b, b.envelope(b.w(), ev, c.AsMessage())
}

// The Attachments host service hands out the files of a message only for
// that message in its own room, with the size limit.
func TestFetchAttachmentService(t *testing.T) {
	b, env := testMessage(t, `{"msgtype":"m.file","body":"notes.txt","url":"mxc://hs/notes","info":{"mimetype":"text/plain"}}`,
		map[string][]byte{"mxc://hs/notes": []byte("hello"), "mxc://hs/big": bytes.Repeat([]byte{1}, 2048)},
		config.Attachments{MaxSize: 1024, MaxTextSize: 1024})
	s := b.services
	if got := env.AttachmentIDs; len(got) != 1 || got[0] != "mxc://hs/notes" {
		t.Fatalf("envelope ids = %v", got)
	}
	if env.Body != "" {
		t.Errorf("envelope body = %q, want no caption", env.Body)
	}
	att, err := s.FetchAttachment(t.Context(), "!room", "$msg", "mxc://hs/notes")
	if err != nil || string(att.Data) != "hello" || att.Name != "notes.txt" || att.Kind != "file" || att.MimeType != "text/plain" || att.Size != 5 {
		t.Fatalf("FetchAttachment = %+v, %v", att, err)
	}
	for _, c := range []struct {
		name  string
		room  id.RoomID
		event id.EventID
		att   string
		want  error
	}{
		{"other room", "!elsewhere", "$msg", "mxc://hs/notes", hooks.ErrNotFound},
		{"other message", "!room", "$other", "mxc://hs/notes", hooks.ErrNotFound},
		{"not an attachment of the message", "!room", "$msg", "mxc://hs/big", hooks.ErrNotFound},
		{"empty id", "!room", "$msg", "", hooks.ErrNotFound},
	} {
		if _, err := s.FetchAttachment(t.Context(), c.room, c.event, c.att); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	big, _ := testMessage(t, `{"msgtype":"m.file","body":"big.bin","url":"mxc://hs/big"}`,
		map[string][]byte{"mxc://hs/big": bytes.Repeat([]byte{1}, 2048)}, config.Attachments{MaxSize: 1024, MaxTextSize: 1024})
	if _, err := big.services.FetchAttachment(t.Context(), "!room", "$msg", "mxc://hs/big"); !errors.Is(err, hooks.ErrTooLarge) {
		t.Errorf("big file: %v, want ErrTooLarge", err)
	}
}

func TestAttachmentIndexForgetsOldMessages(t *testing.T) {
	var x attachmentIndex
	one := []matrixio.Attachment{{ID: "mxc://hs/a"}}
	for i := range rememberedAttachmentMessages + 1 {
		x.add("!room", id.EventID(fmt.Sprintf("$%d", i)), one)
	}
	x.add("!room", "$none", []matrixio.Attachment{{Name: "no id"}})
	if _, ok := x.find("!room", "$0", "mxc://hs/a"); ok {
		t.Error("the oldest message is still remembered")
	}
	if _, ok := x.find("!room", id.EventID(fmt.Sprintf("$%d", rememberedAttachmentMessages)), "mxc://hs/a"); !ok {
		t.Error("the newest message is forgotten")
	}
	if len(x.byMsg) != rememberedAttachmentMessages || len(x.order) != rememberedAttachmentMessages {
		t.Errorf("index holds %d/%d messages", len(x.byMsg), len(x.order))
	}
}
