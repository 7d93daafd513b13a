package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
)

// An attachment is one file of a person's message: an m.image, m.file,
// m.audio or m.video event carries one; a gallery (com.beeper.gallery)
// carries several. Its id, in the hook envelope's AttachmentIDs and for
// the Attachments host service, is the file's mxc:// URI: stable for the
// life of the file, the same in every event that shares the file, and
// meaningless without the message that carries it (the decryption key of
// an encrypted file lives in the message, and the host hands out only
// attachments of the message a hook handles).
type attachment struct {
	id       string // the mxc URI; "" when the message names no valid file
	kind     attachmentKind
	name     string // the file name (never a caption)
	mimeType string // as the sender declared it
	size     int64  // as the sender declared it; 0 when unknown
	duration int    // audio and video, in milliseconds; 0 when unknown
	ref      matrixio.MediaRef
}

// attachmentKind is the msgtype of the file without "m.".
type attachmentKind string

const (
	kindImage attachmentKind = "image"
	kindFile  attachmentKind = "file"
	kindAudio attachmentKind = "audio"
	kindVideo attachmentKind = "video"
)

// attachmentsOf returns the caption (the message's text, "" when there is
// none) and the files of a message. A text message has no files and its
// body is its text. For a file, the body is its caption only when the
// message also names the file (MSC2530's filename field) and the two
// differ; otherwise the body is just the file name.
func attachmentsOf(msg *event.MessageEventContent) (caption string, atts []attachment) {
	var items []*event.MessageEventContent
	switch msg.MsgType {
	case event.MsgImage, event.MsgFile, event.MsgAudio, event.MsgVideo:
		caption, items = msg.GetCaption(), []*event.MessageEventContent{msg}
	case event.MsgBeeperGallery:
		caption, items = msg.BeeperGalleryCaption, msg.BeeperGalleryImages
	default:
		return msg.Body, nil
	}
	seen := map[string]bool{}
	for _, it := range items {
		if it == nil {
			continue
		}
		a := attachment{kind: kindOf(it.MsgType), name: it.GetFileName()}
		if it.Info != nil {
			a.mimeType, a.size, a.duration = it.Info.MimeType, int64(max(it.Info.Size, 0)), it.Info.Duration
		}
		if ref, ok := matrixio.MediaRefOf(it); ok {
			a.id, a.ref = ref.URI.String(), ref
		}
		if a.id != "" && seen[a.id] {
			continue
		}
		seen[a.id] = true
		atts = append(atts, a)
	}
	return caption, atts
}

func kindOf(mt event.MessageType) attachmentKind {
	switch mt {
	case event.MsgImage:
		return kindImage
	case event.MsgAudio:
		return kindAudio
	case event.MsgVideo:
		return kindVideo
	}
	return kindFile
}

// attachmentIDs returns the ids of the attachments that name a file.
func attachmentIDs(atts []attachment) []string {
	var ids []string
	for _, a := range atts {
		if a.id != "" {
			ids = append(ids, a.id)
		}
	}
	return ids
}

// routerText is what the router's model reads of a message with files:
// its caption, and the files by name.
func routerText(caption string, atts []attachment) string {
	var s strings.Builder
	s.WriteString(caption)
	for _, a := range atts {
		if s.Len() > 0 {
			s.WriteString("\n")
		}
		fmt.Fprintf(&s, "[%s %s attached]", kindLabel(a.kind), quoteName(a.name))
	}
	return s.String()
}

// preparedAttachments is what a turn gives the model of its message's
// files: the user text (caption and a description or the text of every
// file), the images for a model with vision, and what the person is told.
type preparedAttachments struct {
	text   string
	images []agents.Image
	// notices are told to the person before the answer, one line each.
	notices []string
	// blind is set when an image was left out because the model has no
	// vision; the person is told once per thread (see turn.prompt).
	blind bool
}

// visionMarker ends the placeholder of an image a model without vision
// does not see. The placeholder is stored with the turn, so a thread whose
// history holds the marker has had its person told already.
const visionMarker = "not shown: this model cannot see images"

// The person is told about the first image a model without vision gets in
// a thread. hookroom finds out from the thread's stored history (see
// visionMarker), so the notice comes once per conversation, also across
// restarts; it comes again only after compaction dropped the turn.
const visionNotice = "I cannot see images with the model I run on, so I only know the names of your images."

// supportedImageTypes are the formats OpenAI-compatible vision models
// accept, as http.DetectContentType names them.
var supportedImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// prepareAttachments downloads what the model gets of the turn's files
// and describes the rest. It is called once per turn, after message:claim
// and before message:enrich. Failures never end the turn: the file is
// described instead and the person is told.
func (t *turn) prepareAttachments(ctx context.Context) preparedAttachments {
	msg := t.ev.Content.AsMessage()
	if msg == nil {
		return preparedAttachments{text: t.env.Body}
	}
	caption, atts := attachmentsOf(msg)
	if len(atts) == 0 {
		return preparedAttachments{text: t.env.Body}
	}
	limits := t.w.cfg.Attachments
	vision := t.w.specs[t.w.cfg.Agents[string(t.agent)].Model].Vision
	var (
		p       preparedAttachments
		blocks  []string
		skipped int
	)
	note := func(format string, args ...any) { p.notices = append(p.notices, fmt.Sprintf(format, args...)) }
	for i, a := range atts {
		switch {
		case i >= limits.MaxPerTurn:
			skipped++
			blocks = append(blocks, describe(a, a.mimeType, a.size, fmt.Sprintf("not shown: only the first %d attachments of a message are given", limits.MaxPerTurn)))
		case a.kind == kindImage:
			blocks = append(blocks, t.prepareImage(ctx, a, limits, vision, &p, note))
		case a.kind == kindFile && textCandidate(a.mimeType):
			blocks = append(blocks, t.prepareText(ctx, a, limits, note))
		default:
			blocks = append(blocks, describe(a, a.mimeType, a.size, "its content is not shown"))
		}
	}
	if skipped > 0 {
		note("Only the first %d attachments of a message reach me; I only know the names of the other %d.", limits.MaxPerTurn, skipped)
	}
	p.text = composeText(caption, blocks)
	return p
}

func (t *turn) prepareImage(ctx context.Context, a attachment, limits config.Attachments, vision bool, p *preparedAttachments, note func(string, ...any)) string {
	if !vision {
		p.blind = true
		return describe(a, a.mimeType, a.size, visionMarker)
	}
	if a.size > int64(limits.MaxSize) {
		note("%s is larger than the %s limit for attachments; I only know its name.", quoteName(a.name), limits.MaxSize)
		return describe(a, a.mimeType, a.size, fmt.Sprintf("not shown: larger than the %s limit", limits.MaxSize))
	}
	data, err := t.download(ctx, a, int64(limits.MaxSize))
	switch {
	case errors.Is(err, matrixio.ErrMediaTooLarge):
		note("%s is larger than the %s limit for attachments; I only know its name.", quoteName(a.name), limits.MaxSize)
		return describe(a, a.mimeType, a.size, fmt.Sprintf("not shown: larger than the %s limit", limits.MaxSize))
	case err != nil:
		note("I could not download %s; I only know its name.", quoteName(a.name))
		return describe(a, a.mimeType, a.size, "not shown: it could not be downloaded")
	}
	// The format comes from the bytes, not from what the sender declared:
	// the model is told the truth, and a wrong declaration is no reason to
	// refuse a good image.
	mt := http.DetectContentType(data)
	if !supportedImageTypes[mt] {
		// Named by the declared type when there is one: the sniffer knows
		// few image formats (an SVG sniffs as text/plain).
		shown := cmpOr(a.mimeType, mt)
		note("I cannot look at %s: its format (%s) is not one I can see (PNG, JPEG, GIF or WebP).", quoteName(a.name), truncate(shown, 100))
		return describe(a, shown, int64(len(data)), "not shown: the format is not supported")
	}
	p.images = append(p.images, agents.Image{MimeType: mt, Data: data})
	return describe(a, mt, int64(len(data)), "")
}

func (t *turn) prepareText(ctx context.Context, a attachment, limits config.Attachments, note func(string, ...any)) string {
	tooLarge := func() string {
		note("%s is larger than the %s limit for text files; I only know its name.", quoteName(a.name), limits.MaxTextSize)
		return describe(a, a.mimeType, a.size, fmt.Sprintf("its content is not shown: larger than the %s limit for text", limits.MaxTextSize))
	}
	if a.size > int64(limits.MaxTextSize) {
		return tooLarge()
	}
	data, err := t.download(ctx, a, int64(limits.MaxTextSize))
	switch {
	case errors.Is(err, matrixio.ErrMediaTooLarge):
		return tooLarge()
	case err != nil:
		note("I could not download %s; I only know its name.", quoteName(a.name))
		return describe(a, a.mimeType, a.size, "its content is not shown: it could not be downloaded")
	}
	text, ok := asText(data)
	if !ok {
		return describe(a, a.mimeType, int64(len(data)), "its content is not shown: it is not text")
	}
	return describe(a, a.mimeType, int64(len(data)), "its text follows") + "\n" + fence(text)
}

// download fetches one file of the turn's message.
func (t *turn) download(ctx context.Context, a attachment, limit int64) ([]byte, error) {
	if a.id == "" {
		return nil, errors.New("failed to download attachment: the message names no file")
	}
	data, err := t.b.downloadMedia(ctx, a.ref, limit)
	if err != nil && !errors.Is(err, matrixio.ErrMediaTooLarge) {
		t.log.Warn().Err(err).Str("attachment", a.id).Msg("failed to download an attachment")
	}
	return data, err
}

const downloadTimeout = 2 * time.Minute

// downloadMedia fetches a file with the router's account (which is in every
// room hookroom serves), giving up after downloadTimeout.
func (b *Bot) downloadMedia(ctx context.Context, ref matrixio.MediaRef, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	if b.fetchMedia != nil {
		return b.fetchMedia(ctx, ref, limit)
	}
	return b.router.Download(ctx, ref, limit)
}

// textCandidate reports whether a file of type mimeType may be text: a
// textual type, or none or a generic one (then the bytes decide).
func textCandidate(mimeType string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(mimeType)), ";")
	mt = strings.TrimSpace(mt)
	switch {
	case mt == "", mt == "application/octet-stream", mt == "binary/octet-stream":
		return true
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml",
		"application/javascript", "application/x-javascript", "application/ecmascript", "application/x-sh",
		"application/x-shellscript", "application/sql", "application/csv", "application/x-csv",
		"application/x-ndjson", "application/graphql", "application/x-tex", "application/x-latex",
		"application/x-python", "application/x-python-code", "application/x-ruby", "application/x-perl",
		"application/x-php", "application/x-httpd-php", "application/x-subrip", "application/x-diff",
		"application/x-patch":
		return true
	}
	return false
}

// asText returns data as text when it is text: valid UTF-8 (a byte order
// mark is dropped) without NUL bytes and with hardly any other control
// characters. ok is false for anything else.
func asText(data []byte) (text string, ok bool) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "", false
	}
	controls := 0
	for _, c := range data {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' && c != 0x1b {
			controls++
		}
	}
	if controls*100 > len(data) {
		return "", false
	}
	return string(data), true
}

// fence puts text between lines of backticks longer than any run of
// backticks inside it, so the text cannot end the block early.
func fence(text string) string {
	longest, run := 0, 0
	for i := 0; i < len(text); i++ {
		if text[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", max(3, longest+1))
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return f + "\n" + text + f
}

// describe is the line that stands for a file in the user text:
// `[Image "cat.png" (image/png, 12.3 KiB) attached]`, with "; " and note
// before the closing bracket when note is not empty.
func describe(a attachment, mimeType string, size int64, note string) string {
	var facts []string
	if mimeType != "" {
		facts = append(facts, truncate(mimeType, 100))
	}
	if size > 0 {
		facts = append(facts, config.ByteSize(size).String())
	}
	if a.duration > 0 {
		secs := (a.duration + 500) / 1000
		facts = append(facts, fmt.Sprintf("%d:%02d", secs/60, secs%60))
	}
	s := kindLabel(a.kind) + " " + quoteName(a.name)
	if len(facts) > 0 {
		s += " (" + strings.Join(facts, ", ") + ")"
	}
	s += " attached"
	if note != "" {
		s += "; " + note
	}
	return "[" + s + "]"
}

func kindLabel(k attachmentKind) string {
	switch k {
	case kindImage:
		return "Image"
	case kindAudio:
		return "Audio"
	case kindVideo:
		return "Video"
	}
	return "File"
}

// maxNameLen bounds a file name in prompts and notices.
const maxNameLen = 200

// quoteName quotes a file name for prompts and notices: shortened, with
// control characters and quotes escaped, so a name cannot fake prompt
// structure.
func quoteName(name string) string {
	if name == "" {
		name = "unnamed"
	}
	return strconv.Quote(truncate(name, maxNameLen))
}

// composeText joins the caption and the file blocks with blank lines.
func composeText(caption string, blocks []string) string {
	parts := make([]string, 0, len(blocks)+1)
	if strings.TrimSpace(caption) != "" {
		parts = append(parts, caption)
	}
	return strings.Join(append(parts, blocks...), "\n\n")
}

// historyTold reports whether a stored turn of the history carries marker.
func historyTold(history []agents.Message, marker string) bool {
	for _, m := range history {
		if m.Role == agents.RoleUser && strings.Contains(m.Content, marker) {
			return true
		}
	}
	return false
}

// attachmentIndex remembers the files of recent messages of people, by
// message, so that hooks can fetch them while the message's turn runs
// (and a while after). Messages are registered when their envelope is
// built; the oldest are forgotten past rememberedAttachmentMessages.
type attachmentIndex struct {
	mu    sync.Mutex
	byMsg map[id.EventID]indexedMessage
	order []id.EventID
}

type indexedMessage struct {
	room id.RoomID
	atts []attachment
}

const rememberedAttachmentMessages = 1024

func (x *attachmentIndex) add(room id.RoomID, evID id.EventID, atts []attachment) {
	if len(attachmentIDs(atts)) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.byMsg == nil {
		x.byMsg = map[id.EventID]indexedMessage{}
	}
	if _, ok := x.byMsg[evID]; !ok {
		x.order = append(x.order, evID)
	}
	x.byMsg[evID] = indexedMessage{room: room, atts: atts}
	if len(x.order) > rememberedAttachmentMessages {
		delete(x.byMsg, x.order[0])
		x.order = x.order[1:]
	}
}

// find returns attachment attID of message evID, when that message is in
// room.
func (x *attachmentIndex) find(room id.RoomID, evID id.EventID, attID string) (attachment, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	m, ok := x.byMsg[evID]
	if !ok || m.room != room || attID == "" {
		return attachment{}, false
	}
	for _, a := range m.atts {
		if a.id == attID {
			return a, true
		}
	}
	return attachment{}, false
}

// FetchAttachment gives a hook a file of the message it handles (the
// engine checked that attachmentID is one of the message's). Files larger
// than attachments.max_size are refused.
func (s *hostServices) FetchAttachment(ctx context.Context, room id.RoomID, sourceEvent id.EventID, attachmentID string) (*hooks.Attachment, error) {
	a, ok := s.attachments.find(room, sourceEvent, attachmentID)
	if !ok {
		return nil, fmt.Errorf("failed to fetch attachment %q of %s: %w", attachmentID, sourceEvent, hooks.ErrNotFound)
	}
	limit := s.b.w().cfg.Attachments.MaxSize
	if a.size > int64(limit) {
		return nil, fmt.Errorf("failed to fetch attachment %q: larger than the %s limit: %w", attachmentID, limit, hooks.ErrTooLarge)
	}
	data, err := s.b.downloadMedia(ctx, a.ref, int64(limit))
	if errors.Is(err, matrixio.ErrMediaTooLarge) {
		return nil, fmt.Errorf("failed to fetch attachment %q: larger than the %s limit: %w", attachmentID, limit, hooks.ErrTooLarge)
	} else if err != nil {
		return nil, fmt.Errorf("failed to fetch attachment %q: %w", attachmentID, err)
	}
	return &hooks.Attachment{
		ID: a.id, Kind: string(a.kind), Name: a.name, MimeType: a.mimeType, Size: int64(len(data)), Data: data,
	}, nil
}
