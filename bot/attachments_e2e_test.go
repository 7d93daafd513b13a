package bot

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/internal/turn"
)

// newAttachEnv is a room with a person and one agent, "seer", on a scripted
// model with or without vision, and a running hookroom; extra hooks join
// the recorder's plugin.
func newAttachEnv(t *testing.T, vision bool, extra ...hooks.Hook) *turnEnv {
	e := &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}
	e.person = e.hs.RegisterUser(t, "alice")
	e.room = createRoom(t, e.person, e.userID("router"), e.userID("seer"))
	e.cfg = agentSetup{
		LLM: e.llm.URL, Model: "agent-model", ModelYAML: fmt.Sprintf("    vision: %v\n", vision),
		Room: e.room, Admins: []id.UserID{e.person.UserID},
		Agents: []string{"seer"}, AgentYAML: "    model: agent\n",
	}.body(e.testEnv)
	e.opts = e.turnOptions(extra...)
	e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
	return e
}

// upload puts data on the homeserver as the person and returns its URI.
func (e *turnEnv) upload(data []byte, mimeType, name string) id.ContentURI {
	e.t.Helper()
	resp, err := e.person.Client.UploadBytesWithName(context.Background(), data, mimeType, name)
	if err != nil {
		e.t.Fatalf("upload: %v", err)
	}
	return resp.ContentURI
}

// sendFile sends a file message of msgtype from the person (into thread,
// when set) and returns its id.
func (e *turnEnv) sendFile(msgtype event.MessageType, uri id.ContentURI, name, mimeType string, size int, caption string, thread id.EventID) id.EventID {
	e.t.Helper()
	content := &event.MessageEventContent{MsgType: msgtype, Body: name, URL: uri.CUString(), Info: &event.FileInfo{MimeType: mimeType, Size: size}}
	if caption != "" {
		content.Body, content.FileName = caption, name
	}
	return e.send(content, thread)
}

// visionNotices waits until the thread rooted at root shows reply (an
// event of the agent's turn, sent after any notice of that turn) and
// returns how many of the thread's events carry the vision notice.
func (e *turnEnv) visionNotices(root, reply id.EventID) int {
	e.t.Helper()
	n := 0
	// Relations lag a moment behind sends on Dendrite.
	testkit.Eventually(e.t, 10*time.Second, fmt.Sprintf("the reply %s shows in the thread of %s", reply, root), func() bool {
		rels, err := e.person.Client.GetRelations(context.Background(), e.room, root, &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionForward, Limit: 100})
		if err != nil {
			e.t.Fatalf("relations: %v", err)
		}
		seen := false
		n = 0
		for _, ev := range rels.Chunk {
			seen = seen || ev.ID == reply
			_ = ev.Content.ParseRaw(ev.Type)
			if m := ev.Content.AsMessage(); m != nil && m.MsgType == event.MsgNotice && strings.Contains(m.Body, turn.VisionNotice) {
				n++
			}
		}
		return seen
	})
	return n
}

func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	img.Set(1, 1, color.RGBA{B: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A person uploads a PNG and sends it: the model's request carries it as an
// image part with exactly its bytes; a hook fetches the same bytes through
// the Attachments host service. Then a text file: its content reaches the
// model as text.
func TestAttachmentsReachTheModel(t *testing.T) {
	var (
		mu      sync.Mutex
		fetched = map[string][]byte{}
		ids     [][]string
		bodies  []string
	)
	e := newAttachEnv(t, true, hooks.Handle(hooks.MessageEnrich, "peek", func(ctx context.Context, c *hooks.MessageEnrichContext) error {
		mu.Lock()
		ids = append(ids, c.Envelope.AttachmentIDs)
		bodies = append(bodies, c.Envelope.Body)
		mu.Unlock()
		for _, attID := range c.Envelope.AttachmentIDs {
			att, err := c.Attachment(ctx, attID)
			if err != nil {
				return err
			}
			mu.Lock()
			fetched[attID] = att.Data
			mu.Unlock()
		}
		return nil
	}))
	e.llm.Script(llmtest.Text("Two coloured pixels."), llmtest.Text("The word is pineapple."))

	// The image, with a caption.
	pic := testPNG(t)
	picURI := e.upload(pic, "image/png", "pixels.png")
	e.sendFile(event.MsgImage, picURI, "pixels.png", "image/png", len(pic), "What is in this picture?", "")
	if got := e.waitTerminal(1); got[0] != "after:Two coloured pixels." {
		t.Fatalf("terminal events %v", got)
	}
	req := e.llm.LastRequest(t)
	parts := req.LastUserParts()
	wantURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pic)
	var text string
	var images []string
	for _, p := range parts {
		switch p.Type {
		case "text":
			text += p.Text
		case "image_url":
			images = append(images, p.ImageURL)
		}
	}
	if len(images) != 1 || images[0] != wantURL {
		t.Fatalf("image parts of the request = %d (%.60q…), want one with the uploaded PNG", len(images), images)
	}
	if !strings.HasPrefix(text, "What is in this picture?\n\n") || !strings.Contains(text, `[Image "pixels.png" (image/png, `) {
		t.Errorf("text part = %q, want the caption and the image's line", text)
	}
	mu.Lock()
	if len(ids) != 1 || len(ids[0]) != 1 || ids[0][0] != picURI.String() || bodies[0] != "What is in this picture?" {
		t.Errorf("envelope attachment ids %v, bodies %q", ids, bodies)
	}
	if !bytes.Equal(fetched[picURI.String()], pic) {
		t.Errorf("the hook fetched %d bytes, want the %d of the PNG", len(fetched[picURI.String()]), len(pic))
	}
	mu.Unlock()

	// The text file, without a caption.
	notes := []byte("Remember: the secret word is pineapple.\n")
	notesURI := e.upload(notes, "text/plain", "notes.txt")
	e.sendFile(event.MsgFile, notesURI, "notes.txt", "text/plain", len(notes), "", "")
	if got := e.waitTerminal(2); got[1] != "after:The word is pineapple." {
		t.Fatalf("terminal events %v", got)
	}
	req = e.llm.LastRequest(t)
	last := req.LastUser()
	if !strings.Contains(last, `[File "notes.txt" (text/plain, `) || !strings.Contains(last, "```\nRemember: the secret word is pineapple.\n```") {
		t.Errorf("last user message = %q, want the file's line and its text", last)
	}
	if req.LastUserParts() != nil {
		t.Errorf("a text file made the content an array of parts: %+v", req.LastUserParts())
	}
	mu.Lock()
	if !bytes.Equal(fetched[notesURI.String()], notes) || bodies[1] != "" {
		t.Errorf("hook fetched %q with body %q", fetched[notesURI.String()], bodies[1])
	}
	mu.Unlock()
}

// A model without vision gets a placeholder instead of the image, and the
// person is told once per thread.
func TestImageForModelWithoutVision(t *testing.T) {
	e := newAttachEnv(t, false)
	e.llm.Script(llmtest.Text("I only see a file name."), llmtest.Text("Still just a name."))
	pic := testPNG(t)
	uri := e.upload(pic, "image/png", "pixels.png")
	root := e.sendFile(event.MsgImage, uri, "pixels.png", "image/png", len(pic), "", "")
	e.waitTerminal(1)
	req := e.llm.LastRequest(t)
	if req.LastUserParts() != nil || !strings.Contains(req.LastUser(), `[Image "pixels.png" (image/png, `) ||
		!strings.Contains(req.LastUser(), turn.VisionMarker) || strings.Contains(string(req.Raw), "image_url") {
		t.Fatalf("request to a model without vision: %s", req.Raw)
	}
	e.mu.Lock()
	first := e.results[0].EventID
	e.mu.Unlock()
	if n := e.visionNotices(root, first); n != 1 {
		t.Fatalf("%d vision notices in the thread after the first image, want 1", n)
	}

	// A second image in the same thread: the placeholder again, no notice.
	e.sendFile(event.MsgImage, uri, "again.png", "image/png", len(pic), "", root)
	if got := e.waitTerminal(2); got[1] != "after:Still just a name." {
		t.Fatalf("terminal events %v", got)
	}
	req = e.llm.LastRequest(t)
	if !strings.Contains(req.LastUser(), `[Image "again.png"`) || !strings.Contains(req.LastUser(), turn.VisionMarker) {
		t.Errorf("second request's last user message = %q", req.LastUser())
	}
	e.mu.Lock()
	second := e.results[1].EventID
	e.mu.Unlock()
	if n := e.visionNotices(root, second); n != 1 {
		t.Errorf("%d vision notices in the thread after the second image, want still 1", n)
	}
}
