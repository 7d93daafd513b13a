package voice

import (
	"encoding/binary"
	"path"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
)

// Kind says what sort of audio a message is.
type Kind int

const (
	// NotAudio is every message that is not audio.
	NotAudio Kind = iota
	// AudioFile is an m.audio message without the voice flag: an uploaded
	// recording.
	AudioFile
	// VoiceNote is a recorded voice message: m.audio with MSC3245's
	// org.matrix.msc3245.voice flag (Element's microphone button).
	VoiceNote
)

// Classify says whether content is audio to transcribe: m.audio (or an
// extensible-events message carrying org.matrix.msc1767.audio), with a
// file to fetch (url, or file for an encrypted one), and whether it is a
// voice note. The bot calls it on each message before its pipeline.
func Classify(content *event.MessageEventContent) Kind {
	if content == nil {
		return NotAudio
	}
	if content.MsgType != event.MsgAudio && content.MSC1767Audio == nil {
		return NotAudio
	}
	if content.URL == "" && content.File == nil {
		return NotAudio
	}
	if content.MSC3245Voice != nil {
		return VoiceNote
	}
	return AudioFile
}

// IsAudio reports whether content is audio to transcribe (Classify is not
// NotAudio).
func IsAudio(content *event.MessageEventContent) bool { return Classify(content) != NotAudio }

// AudioOf returns the recording to transcribe of an audio message whose
// file (downloaded and, for an encrypted room, decrypted by the bot) is
// data: its file name and MIME type come from the event.
func AudioOf(content *event.MessageEventContent, data []byte) Audio {
	a := Audio{Data: data}
	if content == nil {
		return a
	}
	if content.Info != nil {
		a.ContentType = content.Info.MimeType
	}
	name := content.FileName
	if name == "" && content.Body != "" && path.Ext(content.Body) != "" {
		name = content.Body
	}
	a.FileName = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if a.FileName == "." || a.FileName == "/" {
		a.FileName = ""
	}
	return a
}

// MaxTranscriptBytes caps the transcript TranscriptText shows.
const MaxTranscriptBytes = 4000

// TranscriptText is the line the bot shows in the thread for a transcript,
// "🎤 " and the transcript, cut on a character boundary (with "…") to
// MaxTranscriptBytes.
func TranscriptText(transcript string) string {
	return "🎤 " + truncate(strings.TrimSpace(transcript), MaxTranscriptBytes)
}

// ReplyContent returns the m.audio voice message for a spoken reply: text
// is its body (what clients without audio show), speech's type and size
// its info, flagged as a voice note (MSC3245) with its duration when
// known. The bot uploads speech.Data (encrypted in an encrypted room) and
// sets URL or File before sending it.
func ReplyContent(speech Speech, text string) *event.MessageEventContent {
	c := &event.MessageEventContent{
		MsgType:      event.MsgAudio,
		Body:         text,
		FileName:     "reply" + extension(speech.ContentType),
		Info:         &event.FileInfo{MimeType: speech.ContentType, Size: len(speech.Data)},
		MSC3245Voice: &event.MSC3245Voice{},
		MSC1767Audio: &event.MSC1767Audio{Waveform: []int{}},
	}
	if d, ok := Duration(speech); ok {
		c.Info.Duration = int(d.Milliseconds())
		c.MSC1767Audio.Duration = int(d.Milliseconds())
	}
	return c
}

// Duration returns how long speech plays, when its format tells it
// without decoding: a PCM WAV file, or Ogg/Opus (by its last granule
// position).
func Duration(s Speech) (time.Duration, bool) {
	b := s.Data
	switch {
	case len(b) >= 44 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return wavDuration(b)
	case len(b) >= 27 && string(b[0:4]) == "OggS":
		return oggOpusDuration(b)
	}
	return 0, false
}

func wavDuration(b []byte) (time.Duration, bool) {
	var byteRate uint32
	for off := 12; off+8 <= len(b); {
		id, size := string(b[off:off+4]), int(binary.LittleEndian.Uint32(b[off+4:off+8]))
		body := off + 8
		switch {
		case id == "fmt " && size >= 16 && body+16 <= len(b):
			byteRate = binary.LittleEndian.Uint32(b[body+8 : body+12])
		case id == "data" && byteRate > 0:
			size = min(size, len(b)-body)
			return time.Duration(int64(size) * int64(time.Second) / int64(byteRate)), true
		}
		off = body + size + size%2
	}
	return 0, false
}

// oggOpusDuration reads the granule position of the last Ogg page: Opus
// always counts 48 kHz samples, minus the pre-skip of its header.
func oggOpusDuration(b []byte) (time.Duration, bool) {
	i := strings.LastIndex(string(b), "OggS")
	if i < 0 || i+14 > len(b) || len(b) < 28+19 || string(b[28:36]) != "OpusHead" {
		return 0, false
	}
	granule := int64(binary.LittleEndian.Uint64(b[i+6 : i+14]))
	preSkip := int64(binary.LittleEndian.Uint16(b[28+10 : 28+12]))
	if granule <= preSkip {
		return 0, false
	}
	return time.Duration((granule - preSkip) * int64(time.Second) / 48000), true
}
