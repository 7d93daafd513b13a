package hstest_test

import (
	"bytes"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// TestNioSendsVoiceMessage: SendVoice sends what Element's microphone button sends. In a plain
// room another user's client reads an m.audio "Voice message" of audio/ogg with its size and
// duration, MSC1767's text, file and audio (duration, waveform) and MSC3245's voice flag, and
// downloads the recording; in an encrypted room the other person's client (the JS one) gets an
// encrypted m.audio whose attachment decrypts to the recording.
func TestNioSendsVoiceMessage(t *testing.T) {
	t.Parallel()
	srv := hstest.Shared(t)
	alice, bob := srv.RegisterUser(t, "alice"), srv.RegisterUser(t, "bob")
	n := srv.StartClient(t, hstest.Nio, alice, hstest.ClientOptions{})
	ogg := append([]byte("OggS\x00\x02 not really a recording "), bytes.Repeat([]byte{0xff, 0x00}, 300)...)

	plain := n.CreateRoom(t, hstest.RoomOptions{Name: "voice", Invite: []id.UserID{bob.UserID}})
	if _, err := bob.Client.JoinRoomByID(t.Context(), plain); err != nil {
		t.Fatal(err)
	}
	n.WaitMember(t, plain, bob.UserID)
	sent := n.SendVoice(t, plain, ogg, 1234)
	var ev *event.Event
	testkit.Eventually(t, 30*time.Second, "bob reads the voice message", func() bool {
		var err error
		ev, err = bob.Client.GetEvent(t.Context(), plain, sent)
		return err == nil
	})
	if err := ev.Content.ParseRaw(ev.Type); err != nil {
		t.Fatal(err)
	}
	m := ev.Content.AsMessage()
	if m.MsgType != event.MsgAudio || m.Body != "Voice message" || m.Info == nil || m.Info.MimeType != "audio/ogg" ||
		m.Info.Size != len(ogg) || m.Info.Duration != 1234 || m.MSC3245Voice == nil || m.MSC1767Audio == nil ||
		m.MSC1767Audio.Duration != 1234 || len(m.MSC1767Audio.Waveform) == 0 || m.File != nil {
		t.Fatalf("voice message content = %s, want Element's voice message", ev.Content.VeryRaw)
	}
	file, _ := ev.Content.Raw["org.matrix.msc1767.file"].(map[string]any)
	if ev.Content.Raw["org.matrix.msc1767.text"] != "Voice message" || file["url"] != string(m.URL) || file["mimetype"] != "audio/ogg" {
		t.Errorf("MSC1767 fields of %s, want the text and the file", ev.Content.VeryRaw)
	}
	uri, err := m.URL.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if data, err := bob.Client.DownloadBytes(t.Context(), uri); err != nil || !bytes.Equal(data, ogg) {
		t.Fatalf("downloaded %d bytes (%v), want the %d of the recording", len(data), err, len(ogg))
	}

	j := srv.StartClient(t, hstest.JS, bob, hstest.ClientOptions{})
	room := encryptedRoom(t, n, j)
	sent = n.SendVoice(t, room, ogg, 1234)
	got := j.WaitMessage(t, room, hstest.Match{EventID: sent})
	if got.MsgType != "m.audio" || !got.Encrypted || !got.MediaEncrypted || got.Body != "Voice message" {
		t.Fatalf("js received %+v, want an encrypted m.audio with an encrypted attachment", got)
	}
	if back, mimetype := j.Download(t, room, sent); !bytes.Equal(back, ogg) || mimetype != "audio/ogg" {
		t.Fatalf("js downloaded %d bytes of %s, want the %d-byte recording of audio/ogg", len(back), mimetype, len(ogg))
	}
}
