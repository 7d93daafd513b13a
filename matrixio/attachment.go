package matrixio

import "maunium.net/go/mautrix/event"

// An Attachment is one file of a person's message: an m.image, m.file,
// m.audio or m.video event carries one; a gallery (com.beeper.gallery)
// carries several. Its id, in the hook envelope's AttachmentIDs and for
// the Attachments host service, is the file's mxc:// URI: stable for the
// life of the file, the same in every event that shares the file, and
// meaningless without the message that carries it (the decryption key of
// an encrypted file lives in the message, and the host hands out only
// attachments of the message a hook handles).
type Attachment struct {
	ID       string // the mxc URI; "" when the message names no valid file
	Kind     AttachmentKind
	Name     string // the file name (never a caption)
	MimeType string // as the sender declared it
	Size     int64  // as the sender declared it; 0 when unknown
	Duration int    // audio and video, in milliseconds; 0 when unknown
	Ref      MediaRef
}

// AttachmentKind is the msgtype of the file without "m.".
type AttachmentKind string

// The kinds of attachments.
const (
	AttachmentImage AttachmentKind = "image"
	AttachmentFile  AttachmentKind = "file"
	AttachmentAudio AttachmentKind = "audio"
	AttachmentVideo AttachmentKind = "video"
)

// Label names the kind for a person: "Image", "Audio", "Video" or "File".
func (k AttachmentKind) Label() string {
	switch k {
	case AttachmentImage:
		return "Image"
	case AttachmentAudio:
		return "Audio"
	case AttachmentVideo:
		return "Video"
	}
	return "File"
}

// AttachmentsOf returns the caption (the message's text, "" when there is
// none) and the files of a message. A text message has no files and its
// body is its text. For a file, the body is its caption only when the
// message also names the file (MSC2530's filename field) and the two
// differ; otherwise the body is just the file name.
func AttachmentsOf(msg *event.MessageEventContent) (caption string, atts []Attachment) {
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
		a := Attachment{Kind: kindOf(it.MsgType), Name: it.GetFileName()}
		if it.Info != nil {
			a.MimeType, a.Size, a.Duration = it.Info.MimeType, int64(max(it.Info.Size, 0)), it.Info.Duration
		}
		if ref, ok := MediaRefOf(it); ok {
			a.ID, a.Ref = ref.URI.String(), ref
		}
		if a.ID != "" && seen[a.ID] {
			continue
		}
		seen[a.ID] = true
		atts = append(atts, a)
	}
	return caption, atts
}

func kindOf(mt event.MessageType) AttachmentKind {
	switch mt {
	case event.MsgImage:
		return AttachmentImage
	case event.MsgAudio:
		return AttachmentAudio
	case event.MsgVideo:
		return AttachmentVideo
	}
	return AttachmentFile
}

// AttachmentIDs returns the ids of the attachments that name a file.
func AttachmentIDs(atts []Attachment) []string {
	var ids []string
	for _, a := range atts {
		if a.ID != "" {
			ids = append(ids, a.ID)
		}
	}
	return ids
}
