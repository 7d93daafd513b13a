package bot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
	"github.com/hookroom/hookroom/voice"
)

// fakeOgg stands for a recording: the scripted transcription server
// answers with its script whatever it is sent, and checks nothing but
// the upload's form.
var fakeOgg = append([]byte("OggS\x00\x02"), bytes.Repeat([]byte{0x4f, 0x70, 0x75, 0x73, 0x00, 0xff}, 200)...)

// newVoiceEnv is newTurnEnv with one agent, "helper", and voice (the
// YAML of the voice section's entries, two spaces in, %[1]s standing for
// the scripted server's base URL) turned on; hs join the recorder's
// plugin.
func newVoiceEnv(t *testing.T, voiceYAML string, hs ...hooks.Hook) *turnEnv {
	return newTurnEnvWith(t, func(e *turnEnv) {
		e.cfg += "voice:\n" + fmt.Sprintf(voiceYAML, e.llm.URL)
	}, "", []string{"helper"}, "", hs...)
}

// sendVoice uploads data as the person and sends it as a voice message
// (m.audio with the MSC3245 voice flag), in thread when set.
func (e *turnEnv) sendVoice(data []byte, thread id.EventID) id.EventID {
	e.t.Helper()
	uri := e.upload(data, "audio/ogg", "Voice message.ogg")
	return e.send(&event.MessageEventContent{
		MsgType: event.MsgAudio, Body: "Voice message.ogg", URL: uri.CUString(),
		Info:         &event.FileInfo{MimeType: "audio/ogg", Size: len(data), Duration: 1500},
		MSC3245Voice: &event.MSC3245Voice{},
		MSC1767Audio: &event.MSC1767Audio{Duration: 1500, Waveform: []int{}},
	}, thread)
}

// threadEvent waits for the first event in the thread of q that sender
// posted and that passes ok, and returns it (content parsed).
func (e *turnEnv) threadEvent(q id.EventID, sender id.UserID, what string, ok func(*event.MessageEventContent) bool) *event.Event {
	e.t.Helper()
	var found *event.Event
	testkit.Eventually(e.t, 30*time.Second, what, func() bool {
		rels, err := e.person.Client.GetRelations(context.Background(), e.room, q, &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionForward, Limit: 100})
		if err != nil {
			return false
		}
		for _, ev := range rels.Chunk {
			_ = ev.Content.ParseRaw(ev.Type)
			if m := ev.Content.AsMessage(); ev.Sender == sender && m != nil && ok(m) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// voiceNotice waits until the router's voice notice in the thread of q
// shows want, and returns the notice's id.
func (e *turnEnv) voiceNotice(q id.EventID, want string) id.EventID {
	e.t.Helper()
	notice := e.threadEvent(q, e.userID("router"), "the voice notice in the thread of "+string(q), func(m *event.MessageEventContent) bool {
		return m.MsgType == event.MsgNotice && strings.HasPrefix(m.Body, "🎤")
	})
	var text string
	testkit.Eventually(e.t, 30*time.Second, fmt.Sprintf("the voice notice shows %q", want), func() bool {
		text, _, _ = e.visibleText(notice.ID)
		return text == want
	})
	return notice.ID
}

// A person's voice message is transcribed: the thread shows "🎤
// transcript" (the placeholder edited), the recording reaches the
// transcription endpoint byte for byte, the agent's model gets the
// transcript as the person's message and hooks see source_kind voice. A
// transcript starting with "!" is the person's words, not a command. When
// the endpoint fails or hears nothing, the person is told in the thread
// and no turn runs; the room goes on.
func TestVoiceMessageIsTranscribed(t *testing.T) {
	var (
		mu    sync.Mutex
		kinds []hooks.SourceKind
		seen  []string
	)
	e := newVoiceEnv(t, "  transcription:\n    base_url: %[1]s\n    language: en\n",
		hooks.Handle(hooks.MessageEnrich, "peek", func(_ context.Context, c *hooks.MessageEnrichContext) error {
			mu.Lock()
			defer mu.Unlock()
			kinds = append(kinds, c.Envelope.SourceKind)
			seen = append(seen, c.Envelope.Body)
			return nil
		}))
	question := "What is the capital of France?"
	e.llm.ScriptTranscriptions(llmtest.Transcription{Text: " " + question + " "})
	e.llm.Script(llmtest.Text("Paris."))
	q := e.sendVoice(fakeOgg, "")
	if got := e.waitTerminal(1); got[0] != "after:Paris." {
		t.Fatalf("terminal events %v", got)
	}
	e.voiceNotice(q, voice.TranscriptText(question))
	reqs := e.llm.AudioRequests()
	if len(reqs) != 1 || !bytes.Equal(reqs[0].File, fakeOgg) || reqs[0].FileContentType != "audio/ogg" ||
		reqs[0].FileName != "Voice message.ogg" || reqs[0].Language != "en" || reqs[0].Model != voice.DefaultTranscriber {
		t.Fatalf("transcription requests = %+v, want the recording once, byte for byte", reqs)
	}
	if last := e.llm.LastRequest(t).LastUser(); !strings.Contains(last, question) || strings.Contains(last, "Voice message.ogg") {
		t.Errorf("the model's user turn = %q, want the transcript (and not the file)", last)
	}
	mu.Lock()
	if len(kinds) != 1 || kinds[0] != hooks.SourceVoice || seen[0] != question {
		t.Errorf("message:enrich saw kinds %v bodies %q, want voice with the transcript", kinds, seen)
	}
	mu.Unlock()

	// Words that look like a command are the person's words.
	e.llm.ScriptTranscriptions(llmtest.Transcription{Text: "!help me with the weather"})
	e.llm.Script(llmtest.Text("Sunny."))
	q2 := e.sendVoice(fakeOgg, "")
	if got := e.waitTerminal(2); got[1] != "after:Sunny." {
		t.Fatalf("terminal events %v: a spoken !help ran as a command", got)
	}
	e.voiceNotice(q2, "🎤 !help me with the weather")
	if last := e.llm.LastRequest(t).LastUser(); !strings.Contains(last, "!help me with the weather") {
		t.Errorf("the model's user turn = %q, want the spoken words", last)
	}

	// The endpoint fails, then hears nothing: the person is told; no turn.
	e.llm.ScriptTranscriptions(llmtest.Transcription{Status: 503}, llmtest.Transcription{Text: "  "})
	q3 := e.sendVoice(fakeOgg, "")
	e.voiceNotice(q3, voiceUnavailable)
	q4 := e.sendVoice(fakeOgg, "")
	e.voiceNotice(q4, voiceNoWords)
	// A text message after them is answered: the room's queue went on,
	// and the failed ones started no turn (the model saw three requests).
	e.llm.Script(llmtest.Text("pong"))
	e.say("ping", "")
	if got := e.waitTerminal(3); got[2] != "after:pong" {
		t.Fatalf("terminal events %v", got)
	}
	if n := len(e.llm.Requests()); n != 3 {
		t.Errorf("the model got %d requests, want 3 (the failed voice messages start no turn)", n)
	}
	if n := len(e.llm.AudioRequests()); n != 4 {
		t.Errorf("the transcription endpoint got %d requests, want 4", n)
	}
}

// With voice.reply when_spoken_to, the answer to a voice message is also
// spoken: after the text reply the agent sends an m.audio voice message
// in the thread whose bytes are the speech server's and whose body is the
// reply; a text message earlier in the same thread got no spoken reply.
func TestVoiceSpokenReply(t *testing.T) {
	e := newVoiceEnv(t, "  transcription:\n    base_url: %[1]s\n  speech:\n    enabled: true\n    base_url: %[1]s\n    voice: nova\n  reply: when_spoken_to\n")
	e.llm.Script(llmtest.Text("Hello."), llmtest.Text("It is noon."))
	q := e.say("hi", "")
	if got := e.waitTerminal(1); got[0] != "after:Hello." {
		t.Fatalf("terminal events %v", got)
	}
	spoken := llmtest.SilenceWAV()
	e.llm.ScriptTranscriptions(llmtest.Transcription{Text: "What time is it?"})
	e.llm.ScriptSpeech(llmtest.Speech{Audio: spoken, ContentType: "audio/wav"})
	e.sendVoice(fakeOgg, q)
	agent := e.userID("helper")
	audio := e.threadEvent(q, agent, "the spoken reply in the thread", func(m *event.MessageEventContent) bool {
		return m.MsgType == event.MsgAudio
	})
	m := audio.Content.AsMessage()
	if m.Body != "It is noon." || m.MSC3245Voice == nil || m.Info == nil || m.Info.MimeType != "audio/wav" || m.Info.Duration != 200 {
		t.Errorf("spoken reply content = %+v, want a voice message with the reply as its body", m)
	}
	uri, err := m.URL.Parse()
	if err != nil {
		t.Fatalf("spoken reply url %q: %v", m.URL, err)
	}
	data, err := e.person.Client.DownloadBytes(context.Background(), uri)
	if err != nil || !bytes.Equal(data, spoken) {
		t.Fatalf("downloaded %d bytes (%v), want the %d the speech server made", len(data), err, len(spoken))
	}
	var speech []llmtest.AudioRequest
	for _, r := range e.llm.AudioRequests() {
		if strings.HasSuffix(r.Path, "/audio/speech") {
			speech = append(speech, r)
		}
	}
	if len(speech) != 1 || speech[0].Input != "It is noon." || speech[0].Voice != "nova" || speech[0].ResponseFormat != "opus" {
		t.Errorf("speech requests = %+v, want one for the voice message's answer", speech)
	}
}

// In an encrypted room the spoken reply is an encrypted attachment: the
// person's independent client (nio) decrypts the event and the file, and
// gets the speech server's bytes.
func TestVoiceSpokenReplyEncrypted(t *testing.T) {
	e := newEnv(t)
	llm := llmtest.NewServer(t)
	alice := e.hs.RegisterUser(t, "alice")
	voiceYAML := fmt.Sprintf("voice:\n  speech:\n    enabled: true\n    base_url: %s\n  reply: always\n", llm.URL)
	cfg := e.config(e.secretRoomSetup(llm, alice).body(e) + voiceYAML)
	var rec events
	r := e.start(cfg, &rec, Options{PlaceholderDelay: 50 * time.Millisecond, EditInterval: 100 * time.Millisecond})
	room := r.bot.w().rooms["secret"]
	phone := e.joinEncrypted(t, hstest.Nio, alice, room)
	agent := e.userID("helper")

	spoken := append(llmtest.SilenceWAV(), []byte("tail")...)
	llm.Script(llmtest.Text("Spoken and written."))
	llm.ScriptSpeech(llmtest.Speech{Audio: spoken, ContentType: "audio/wav"})
	q := phone.SendText(t, room, "@"+e.localpart("helper")+" say something")
	text := phone.WaitMessage(t, room, hstest.Match{Sender: agent, Contains: "Spoken and written.", ThreadRoot: q})
	got := phone.WaitMessage(t, room, hstest.Match{Sender: agent, ThreadRoot: q, After: text.EventID})
	if got.MsgType != string(event.MsgAudio) || !got.Encrypted || got.Undecryptable || !got.MediaEncrypted || got.Body != "Spoken and written." {
		t.Fatalf("spoken reply = %+v, want an encrypted m.audio with an encrypted file", got)
	}
	data, mimeType := phone.Download(t, room, got.EventID)
	if !bytes.Equal(data, spoken) || mimeType != "audio/wav" {
		t.Fatalf("decrypted %d bytes of %s, want the %d bytes the speech server made", len(data), mimeType, len(spoken))
	}
}

// hookroom stops while a voice message is being transcribed: the message
// stays unhandled, and the next start transcribes it again and edits the
// placeholder the first run posted (no second one), then answers once.
func TestVoiceReplayPostsOnce(t *testing.T) {
	e := newVoiceEnv(t, "  transcription:\n    base_url: %[1]s\n")
	e.llm.ScriptTranscriptions(llmtest.Transcription{Text: "first run", Delay: time.Minute})
	q := e.sendVoice(fakeOgg, "")
	e.voiceNotice(q, voiceWorking)
	testkit.Eventually(t, 30*time.Second, "the transcription request", func() bool { return len(e.llm.AudioRequests()) == 1 })
	e.restart(func() {
		e.llm.ScriptTranscriptions(llmtest.Transcription{Text: "second run"})
		e.llm.Script(llmtest.Text("Answered once."))
	})
	if got := e.waitTerminal(1); got[0] != "after:Answered once." {
		t.Fatalf("terminal events %v", got)
	}
	e.voiceNotice(q, "🎤 second run")
	rels, err := e.person.Client.GetRelations(context.Background(), e.room, q, &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionForward, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	notices := 0
	for _, ev := range rels.Chunk {
		_ = ev.Content.ParseRaw(ev.Type)
		if m := ev.Content.AsMessage(); ev.Sender == e.userID("router") && m != nil && strings.HasPrefix(m.Body, "🎤") {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d voice notices in the thread, want the first run's placeholder only", notices)
	}
	if n := len(e.llm.AudioRequests()); n != 2 {
		t.Errorf("%d transcription requests, want 2 (one per run)", n)
	}
}

// voiceOptions carries every key of config.yaml's voice section over to
// the voice package, and a transcribed event keeps the message's id and
// relations but no file (no Dendrite needed).
func TestVoiceOptionsAndTranscribedEvent(t *testing.T) {
	c := config.Voice{
		Transcription: config.VoiceTranscription{BaseURL: "http://stt/v1", Model: "m1", Language: "de", APIKey: "k1", Timeout: config.Duration(time.Second)},
		Speech:        config.VoiceSpeech{Enabled: true, BaseURL: "http://tts/v1", Model: "m2", Voice: "nova", Format: "wav", APIKey: "k2", Timeout: config.Duration(2 * time.Second)},
		Reply:         config.VoiceReplyAlways, MaxAudioBytes: 5 * config.MiB,
	}
	want := voice.Options{
		Transcription: voice.TranscriptionOptions{BaseURL: "http://stt/v1", Model: "m1", Language: "de", APIKey: "k1", Timeout: time.Second},
		Speech:        voice.SpeechOptions{Enabled: true, BaseURL: "http://tts/v1", Model: "m2", Voice: "nova", Format: "wav", APIKey: "k2", Timeout: 2 * time.Second},
		Reply:         voice.Always, MaxAudioBytes: 5 << 20,
	}
	if got := voiceOptions(c); !reflect.DeepEqual(got, want) {
		t.Errorf("voiceOptions =\n%#v\nwant\n%#v", got, want)
	}
	if err := voiceOptions(c).Validate(); err != nil {
		t.Errorf("a valid voice section converts to invalid options: %v", err)
	}

	rel := (&event.RelatesTo{}).SetThread("$root", "$last")
	ev := &event.Event{ID: "$voice", Sender: "@alice:example.org", RoomID: "!room:example.org", Type: event.EventMessage}
	msg := &event.MessageEventContent{MsgType: event.MsgAudio, Body: "Voice message.ogg", URL: "mxc://example.org/abc", RelatesTo: rel, MSC3245Voice: &event.MSC3245Voice{}}
	tev, tmsg := transcribedEvent(ev, msg, "!help me")
	if tev == ev || tev.ID != ev.ID || tev.Sender != ev.Sender || tev.RoomID != ev.RoomID {
		t.Fatalf("transcribed event %+v, want a copy with the same id, sender and room", tev)
	}
	parsed := tev.Content.AsMessage()
	if parsed != tmsg || tmsg.MsgType != event.MsgText || tmsg.Body != "!help me" || tmsg.URL != "" || threadRoot(tmsg) != "$root" {
		t.Errorf("transcribed content %+v, want m.text with the transcript in the thread", tmsg)
	}
	if tev.Content.Raw["body"] != "!help me" || tev.Content.Raw["msgtype"] != "m.text" || malformedMessage(tev, tmsg) != "" {
		t.Errorf("raw content %v does not match the parsed one", tev.Content.Raw)
	}
	if ev.Content.Parsed != nil || msg.MsgType != event.MsgAudio {
		t.Error("transcribedEvent changed the original event")
	}
}

// speak records text with Debian's espeak-ng and encodes it as Ogg/Opus
// with opus-tools' opusenc, the format of a phone's voice message, in a
// fresh t.TempDir(); it returns the file's bytes and how long it plays in
// milliseconds. A missing tool fails the test.
func speak(t *testing.T, text string) ([]byte, int) {
	t.Helper()
	for _, tool := range []string{"espeak-ng", "opusenc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (Debian's espeak-ng and opus-tools make the voice tests' recordings): run ./scripts/test-clients.sh install", tool)
		}
	}
	dir := t.TempDir()
	wav, ogg := filepath.Join(dir, "speech.wav"), filepath.Join(dir, "speech.ogg")
	for _, args := range [][]string{
		{"espeak-ng", "-v", "en", "-w", wav, "--", text},
		{"opusenc", "--quiet", "--speech", wav, ogg},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%q failed: %v\n%s", args, err, out)
		}
	}
	data, err := os.ReadFile(ogg)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := voice.Duration(voice.Speech{Data: data})
	if !bytes.HasPrefix(data, []byte("OggS")) || !bytes.Contains(data[:64], []byte("OpusHead")) || !ok || d < 300*time.Millisecond {
		t.Fatalf("opusenc made %d bytes (%.8q…) playing %v, want an Ogg/Opus recording of %q", len(data), data, d, text)
	}
	return data, int(d.Milliseconds())
}

// transcriptionRequests returns what llm's transcription endpoint received.
func transcriptionRequests(llm *llmtest.Server) []llmtest.AudioRequest {
	var out []llmtest.AudioRequest
	for _, r := range llm.AudioRequests() {
		if strings.HasSuffix(r.Path, "/audio/transcriptions") {
			out = append(out, r)
		}
	}
	return out
}

// A real recording (espeak-ng speech, Ogg/Opus by opusenc) sent the way
// Element sends a voice message, by the person's independent client (nio)
// in an encrypted room: it reaches the transcription server byte for
// byte, the thread shows "🎤 transcript", the model gets the transcript
// as the person's words and answers, and (voice.reply when_spoken_to) the
// answer also comes as an encrypted m.audio voice message that decrypts to
// the speech server's bytes. Bad input: a transcription server answering
// nonsense or HTTP 500 gets the person told, and no turn runs; a speech
// server that is down leaves the text answer, with no audio, and the
// thread's history goes on.
func TestVoiceRecordingEncrypted(t *testing.T) {
	e := newEnv(t)
	question, answer := "What is the capital of France?", "Paris is the capital of France."
	recording, durationMS := speak(t, question)
	spoken, _ := speak(t, answer)
	llm := llmtest.NewServer(t)
	tts := llmtest.NewServer(t) // the speech server, shut down later
	alice := e.hs.RegisterUser(t, "alice")
	voiceYAML := fmt.Sprintf("voice:\n  transcription:\n    base_url: %s\n  speech:\n    enabled: true\n    base_url: %s\n  reply: when_spoken_to\n", llm.URL, tts.URL)
	cfg := e.config(e.secretRoomSetup(llm, alice).body(e) + voiceYAML)
	var rec events
	r := e.start(cfg, &rec, Options{PlaceholderDelay: 50 * time.Millisecond, EditInterval: 100 * time.Millisecond})
	room := r.bot.w().rooms["secret"]
	phone := e.joinEncrypted(t, hstest.Nio, alice, room)
	router, agent := e.userID("router"), e.userID("helper")

	llm.ScriptTranscriptions(llmtest.Transcription{Text: " " + question})
	llm.Script(llmtest.Text(answer))
	tts.ScriptSpeech(llmtest.Speech{Audio: spoken, ContentType: "audio/ogg"})
	v := phone.SendVoice(t, room, recording, durationMS)

	notice := phone.WaitMessage(t, room, hstest.Match{Sender: router, ThreadRoot: v, Contains: "🎤"})
	testkit.Eventually(t, 30*time.Second, "the voice notice shows the transcript", func() bool {
		notice = phone.WaitMessage(t, room, hstest.Match{EventID: notice.EventID})
		return notice.FinalBody == voice.TranscriptText(question)
	})
	if notice.MsgType != string(event.MsgNotice) || !notice.Encrypted || notice.UndecryptableEdits > 0 {
		t.Errorf("voice notice = %+v, want an encrypted m.notice whose edits decrypt", notice)
	}
	text := phone.WaitMessage(t, room, hstest.Match{Sender: agent, ThreadRoot: v, Contains: answer})
	if text.MsgType == string(event.MsgAudio) || !text.Encrypted {
		t.Errorf("text answer = %+v, want an encrypted text message before the spoken one", text)
	}
	stt := transcriptionRequests(llm)
	if len(stt) != 1 {
		t.Fatalf("%d transcription requests, want 1", len(stt))
	}
	if got := stt[0]; sha256.Sum256(got.File) != sha256.Sum256(recording) || got.FileContentType != "audio/ogg" || path.Ext(got.FileName) != ".ogg" {
		t.Fatalf("the transcription server got %d bytes (sha256 %x) named %q of %s, want the %d-byte recording (sha256 %x), byte for byte, as .ogg of audio/ogg",
			len(got.File), sha256.Sum256(got.File), got.FileName, got.FileContentType, len(recording), sha256.Sum256(recording))
	}
	if last := lastUserMessage(t, llm); !strings.Contains(last, question) || strings.Contains(last, "Voice message") {
		t.Errorf("the model's user turn = %q, want the transcript (and not the file)", last)
	}

	audio := phone.WaitMessage(t, room, hstest.Match{Sender: agent, ThreadRoot: v, After: text.EventID})
	if audio.MsgType != string(event.MsgAudio) || !audio.Encrypted || !audio.MediaEncrypted || audio.Body != answer {
		t.Fatalf("spoken reply = %+v, want an encrypted m.audio with an encrypted file and the answer as its body", audio)
	}
	data, mimeType := phone.Download(t, room, audio.EventID)
	if sha256.Sum256(data) != sha256.Sum256(spoken) || mimeType != "audio/ogg" {
		t.Fatalf("decrypted %d bytes of %s, want the %d bytes of audio/ogg the speech server made", len(data), mimeType, len(spoken))
	}
	if speech := tts.AudioRequests(); len(speech) != 1 || speech[0].Input != answer || speech[0].ResponseFormat != "opus" {
		t.Errorf("speech requests = %+v, want one for the answer, in Opus", speech)
	}

	// A transcription server that answers nonsense, then one that fails:
	// the person is told each time, and no turn runs. A text message after
	// them is answered (the room went on), and the model saw it as its
	// second request only.
	llm.ScriptTranscriptions(llmtest.Transcription{Garbage: "<html>502 Bad Gateway</html>"}, llmtest.Transcription{Status: 500, Body: "internal error"})
	for range 2 {
		bad := phone.SendVoice(t, room, recording, durationMS)
		told := phone.WaitMessage(t, room, hstest.Match{Sender: router, ThreadRoot: bad, Contains: voiceUnavailable})
		if !told.Encrypted || told.MsgType != string(event.MsgNotice) {
			t.Errorf("failure notice = %+v, want an encrypted m.notice", told)
		}
	}
	llm.Script(llmtest.Text("pong"))
	ping := phone.SendText(t, room, "ping")
	phone.WaitMessage(t, room, hstest.Match{Sender: agent, ThreadRoot: ping, Contains: "pong"})
	if n := len(llm.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2 (the voice messages that were not transcribed start no turn)", n)
	}
	if stt := transcriptionRequests(llm); len(stt) != 3 || !bytes.Equal(stt[1].File, recording) || !bytes.Equal(stt[2].File, recording) {
		t.Errorf("the transcription endpoint got %d requests, want 3 with the recording", len(stt))
	}

	// The speech server is down: the text answer arrives, no audio. The
	// next message in the thread, queued behind the spoken reply, is
	// answered next, with the voice message's transcript and answer in its
	// history: nothing was lost.
	tts.Close()
	italy := "What is the capital of Italy?"
	llm.ScriptTranscriptions(llmtest.Transcription{Text: italy})
	llm.Script(llmtest.Text("Rome."), llmtest.Text("You asked about Italy."))
	v2 := phone.SendVoice(t, room, recording, durationMS)
	text2 := phone.WaitMessage(t, room, hstest.Match{Sender: agent, ThreadRoot: v2, Contains: "Rome."})
	barrier := phone.Send(t, room, hstest.Outgoing{Body: "Which country did I ask about?", ThreadRoot: v2})
	last := phone.WaitMessage(t, room, hstest.Match{Sender: agent, ThreadRoot: v2, Contains: "You asked about Italy."})
	if next := phone.WaitMessage(t, room, hstest.Match{Sender: agent, ThreadRoot: v2, After: text2.EventID}); next.EventID != last.EventID {
		t.Errorf("after the text answer the agent sent %+v, want the answer to %s next (no spoken reply: the speech server is down)", next, barrier)
	}
	if text2.MsgType == string(event.MsgAudio) {
		t.Errorf("the text answer is %+v", text2)
	}
	var history strings.Builder
	for _, m := range llm.LastRequest(t).Body.Messages {
		history.WriteString(string(m.Content))
	}
	if h := history.String(); !strings.Contains(h, italy) || !strings.Contains(h, "Rome.") || !strings.Contains(h, "Which country did I ask about?") {
		t.Errorf("the model's last request = %s, want the voice message's transcript and answer in the thread's history", h)
	}
	if n := len(tts.AudioRequests()); n != 1 {
		t.Errorf("the speech server got %d requests, want 1 (it was down for the second)", n)
	}
}
