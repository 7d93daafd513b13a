package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/matrixio"
)

// routerText is what the router's model reads of a message with files:
// its caption, and the files by name.
func routerText(caption string, atts []matrixio.Attachment) string {
	var s strings.Builder
	s.WriteString(caption)
	for _, a := range atts {
		if s.Len() > 0 {
			s.WriteString("\n")
		}
		fmt.Fprintf(&s, "[%s %s attached]", a.Kind.Label(), turn.QuoteName(a.Name))
	}
	return s.String()
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
	atts []matrixio.Attachment
}

const rememberedAttachmentMessages = 1024

func (x *attachmentIndex) add(room id.RoomID, evID id.EventID, atts []matrixio.Attachment) {
	if len(matrixio.AttachmentIDs(atts)) == 0 {
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
func (x *attachmentIndex) find(room id.RoomID, evID id.EventID, attID string) (matrixio.Attachment, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	m, ok := x.byMsg[evID]
	if !ok || m.room != room || attID == "" {
		return matrixio.Attachment{}, false
	}
	for _, a := range m.atts {
		if a.ID == attID {
			return a, true
		}
	}
	return matrixio.Attachment{}, false
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
	if a.Size > int64(limit) {
		return nil, fmt.Errorf("failed to fetch attachment %q: larger than the %s limit: %w", attachmentID, limit, hooks.ErrTooLarge)
	}
	data, err := s.b.downloadMedia(ctx, a.Ref, int64(limit))
	if errors.Is(err, matrixio.ErrMediaTooLarge) {
		return nil, fmt.Errorf("failed to fetch attachment %q: larger than the %s limit: %w", attachmentID, limit, hooks.ErrTooLarge)
	} else if err != nil {
		return nil, fmt.Errorf("failed to fetch attachment %q: %w", attachmentID, err)
	}
	return &hooks.Attachment{
		ID: a.ID, Kind: string(a.Kind), Name: a.Name, MimeType: a.MimeType, Size: int64(len(data)), Data: data,
	}, nil
}
