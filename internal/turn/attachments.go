package turn

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/internal/runes"
	"github.com/hookroom/hookroom/matrixio"
)

// AttachmentLimits bound what a turn gives the model of its message's
// files (config.yaml's attachments).
type AttachmentLimits struct {
	// MaxSize is the largest file downloaded at all (images); MaxTextSize
	// the largest text file given as text; MaxPerTurn how many files of one
	// message the model gets (the others are only named).
	MaxSize, MaxTextSize int64
	MaxPerTurn           int
	// FormatSize writes a size for a person ("20 MiB"); bytes when nil.
	FormatSize func(int64) string
}

func (l AttachmentLimits) size(n int64) string {
	if l.FormatSize == nil {
		return strconv.FormatInt(n, 10) + " B"
	}
	return l.FormatSize(n)
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

// VisionMarker ends the placeholder of an image a model without vision
// does not see. The placeholder is stored with the turn, so a thread whose
// history holds the marker has had its person told already.
const VisionMarker = "not shown: this model cannot see images"

// VisionNotice tells the person about the first image a model without vision gets in
// a thread. hookroom finds out from the thread's stored history (see
// VisionMarker), so the notice comes once per conversation, also across
// restarts; it comes again only after compaction dropped the turn.
const VisionNotice = "I cannot see images with the model I run on, so I only know the names of your images."

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
	caption, atts := matrixio.AttachmentsOf(msg)
	if len(atts) == 0 {
		return preparedAttachments{text: t.env.Body}
	}
	limits := t.spec.Attachments
	vision := t.modelOpt.Vision
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
			blocks = append(blocks, limits.describe(a, a.MimeType, a.Size, fmt.Sprintf("not shown: only the first %d attachments of a message are given", limits.MaxPerTurn)))
		case a.Kind == matrixio.AttachmentImage:
			blocks = append(blocks, t.prepareImage(ctx, a, limits, vision, &p, note))
		case a.Kind == matrixio.AttachmentFile && textCandidate(a.MimeType):
			blocks = append(blocks, t.prepareText(ctx, a, limits, note))
		default:
			blocks = append(blocks, limits.describe(a, a.MimeType, a.Size, "its content is not shown"))
		}
	}
	if skipped > 0 {
		note("Only the first %d attachments of a message reach me; I only know the names of the other %d.", limits.MaxPerTurn, skipped)
	}
	p.text = composeText(caption, blocks)
	return p
}

func (t *turn) prepareImage(ctx context.Context, a matrixio.Attachment, limits AttachmentLimits, vision bool, p *preparedAttachments, note func(string, ...any)) string {
	if !vision {
		p.blind = true
		return limits.describe(a, a.MimeType, a.Size, VisionMarker)
	}
	if a.Size > limits.MaxSize {
		note("%s is larger than the %s limit for attachments; I only know its name.", QuoteName(a.Name), limits.size(limits.MaxSize))
		return limits.describe(a, a.MimeType, a.Size, fmt.Sprintf("not shown: larger than the %s limit", limits.size(limits.MaxSize)))
	}
	data, err := t.download(ctx, a, limits.MaxSize)
	switch {
	case errors.Is(err, matrixio.ErrMediaTooLarge):
		note("%s is larger than the %s limit for attachments; I only know its name.", QuoteName(a.Name), limits.size(limits.MaxSize))
		return limits.describe(a, a.MimeType, a.Size, fmt.Sprintf("not shown: larger than the %s limit", limits.size(limits.MaxSize)))
	case err != nil:
		note("I could not download %s; I only know its name.", QuoteName(a.Name))
		return limits.describe(a, a.MimeType, a.Size, "not shown: it could not be downloaded")
	}
	// The format comes from the bytes, not from what the sender declared:
	// the model is told the truth, and a wrong declaration is no reason to
	// refuse a good image.
	mt := http.DetectContentType(data)
	if !supportedImageTypes[mt] {
		// Named by the declared type when there is one: the sniffer knows
		// few image formats (an SVG sniffs as text/plain).
		shown := cmp.Or(a.MimeType, mt)
		note("I cannot look at %s: its format (%s) is not one I can see (PNG, JPEG, GIF or WebP).", QuoteName(a.Name), runes.Truncate(shown, 100))
		return limits.describe(a, shown, int64(len(data)), "not shown: the format is not supported")
	}
	p.images = append(p.images, agents.Image{MimeType: mt, Data: data})
	return limits.describe(a, mt, int64(len(data)), "")
}

func (t *turn) prepareText(ctx context.Context, a matrixio.Attachment, limits AttachmentLimits, note func(string, ...any)) string {
	tooLarge := func() string {
		note("%s is larger than the %s limit for text files; I only know its name.", QuoteName(a.Name), limits.size(limits.MaxTextSize))
		return limits.describe(a, a.MimeType, a.Size, fmt.Sprintf("its content is not shown: larger than the %s limit for text", limits.size(limits.MaxTextSize)))
	}
	if a.Size > limits.MaxTextSize {
		return tooLarge()
	}
	data, err := t.download(ctx, a, limits.MaxTextSize)
	switch {
	case errors.Is(err, matrixio.ErrMediaTooLarge):
		return tooLarge()
	case err != nil:
		note("I could not download %s; I only know its name.", QuoteName(a.Name))
		return limits.describe(a, a.MimeType, a.Size, "its content is not shown: it could not be downloaded")
	}
	text, ok := asText(data)
	if !ok {
		return limits.describe(a, a.MimeType, int64(len(data)), "its content is not shown: it is not text")
	}
	return limits.describe(a, a.MimeType, int64(len(data)), "its text follows") + "\n" + fence(text)
}

// download fetches one file of the turn's message.
func (t *turn) download(ctx context.Context, a matrixio.Attachment, limit int64) ([]byte, error) {
	if a.ID == "" {
		return nil, errors.New("failed to download attachment: the message names no file")
	}
	data, err := t.deps.Download(ctx, a.Ref, limit)
	if err != nil && !errors.Is(err, matrixio.ErrMediaTooLarge) {
		t.log.Warn().Err(err).Str("attachment", a.ID).Msg("failed to download an attachment")
	}
	return data, err
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
func (limits AttachmentLimits) describe(a matrixio.Attachment, mimeType string, size int64, note string) string {
	var facts []string
	if mimeType != "" {
		facts = append(facts, runes.Truncate(mimeType, 100))
	}
	if size > 0 {
		facts = append(facts, limits.size(size))
	}
	if a.Duration > 0 {
		secs := (a.Duration + 500) / 1000
		facts = append(facts, fmt.Sprintf("%d:%02d", secs/60, secs%60))
	}
	s := a.Kind.Label() + " " + QuoteName(a.Name)
	if len(facts) > 0 {
		s += " (" + strings.Join(facts, ", ") + ")"
	}
	s += " attached"
	if note != "" {
		s += "; " + note
	}
	return "[" + s + "]"
}

// maxNameLen bounds a file name in prompts and notices.
const maxNameLen = 200

// QuoteName quotes a file name for prompts and notices: shortened, with
// control characters and quotes escaped, so a name cannot fake prompt
// structure.
func QuoteName(name string) string {
	if name == "" {
		name = "unnamed"
	}
	return strconv.Quote(runes.Truncate(name, maxNameLen))
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
