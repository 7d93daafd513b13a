package matrixio

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	mxattachment "maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
)

func parseMessage(t *testing.T, content string) *event.MessageEventContent {
	t.Helper()
	var msg event.MessageEventContent
	if err := json.Unmarshal([]byte(content), &msg); err != nil {
		t.Fatal(err)
	}
	return &msg
}

func TestAttachmentsOf(t *testing.T) {
	enc := mxattachment.NewEncryptedFile()
	encJSON, err := json.Marshal(event.EncryptedFileInfo{EncryptedFile: *enc, URL: "mxc://hs/enc"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		content     string
		wantCaption string
		wantIDs     []string
		wantNames   []string
		wantKinds   []AttachmentKind
		wantEnc     bool
	}{{
		name:        "text message",
		content:     `{"msgtype":"m.text","body":"hello"}`,
		wantCaption: "hello",
	}, {
		name:      "image without caption: the body is the file name",
		content:   `{"msgtype":"m.image","body":"cat.png","url":"mxc://hs/cat","info":{"mimetype":"image/png","size":12}}`,
		wantIDs:   []string{"mxc://hs/cat"},
		wantNames: []string{"cat.png"},
		wantKinds: []AttachmentKind{AttachmentImage},
	}, {
		name:      "image whose filename equals the body has no caption",
		content:   `{"msgtype":"m.image","body":"cat.png","filename":"cat.png","url":"mxc://hs/cat"}`,
		wantIDs:   []string{"mxc://hs/cat"},
		wantNames: []string{"cat.png"},
		wantKinds: []AttachmentKind{AttachmentImage},
	}, {
		name:        "image with a caption (MSC2530)",
		content:     `{"msgtype":"m.image","body":"what is this?","filename":"cat.png","url":"mxc://hs/cat"}`,
		wantCaption: "what is this?",
		wantIDs:     []string{"mxc://hs/cat"},
		wantNames:   []string{"cat.png"},
		wantKinds:   []AttachmentKind{AttachmentImage},
	}, {
		name:      "encrypted file",
		content:   `{"msgtype":"m.file","body":"notes.txt","file":` + string(encJSON) + `}`,
		wantIDs:   []string{"mxc://hs/enc"},
		wantNames: []string{"notes.txt"},
		wantKinds: []AttachmentKind{AttachmentFile},
		wantEnc:   true,
	}, {
		name:      "audio and video keep their kind",
		content:   `{"msgtype":"m.audio","body":"voice.ogg","url":"mxc://hs/voice","info":{"duration":12000}}`,
		wantIDs:   []string{"mxc://hs/voice"},
		wantNames: []string{"voice.ogg"},
		wantKinds: []AttachmentKind{AttachmentAudio},
	}, {
		name:      "a file without a valid url is still an attachment, without id",
		content:   `{"msgtype":"m.file","body":"lost.bin","url":"https://example.org/lost.bin"}`,
		wantNames: []string{"lost.bin"},
		wantKinds: []AttachmentKind{AttachmentFile},
	}, {
		name: "gallery",
		content: `{"msgtype":"com.beeper.gallery","body":"two cats","com.beeper.gallery.caption":"two cats","com.beeper.gallery.images":[
			{"msgtype":"m.image","body":"a.png","url":"mxc://hs/a"},{"msgtype":"m.image","body":"b.png","url":"mxc://hs/b"},
			{"msgtype":"m.image","body":"a-again.png","url":"mxc://hs/a"}]}`,
		wantCaption: "two cats",
		wantIDs:     []string{"mxc://hs/a", "mxc://hs/b"},
		wantNames:   []string{"a.png", "b.png"},
		wantKinds:   []AttachmentKind{AttachmentImage, AttachmentImage},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caption, atts := AttachmentsOf(parseMessage(t, tt.content))
			if caption != tt.wantCaption {
				t.Errorf("caption = %q, want %q", caption, tt.wantCaption)
			}
			if got := AttachmentIDs(atts); strings.Join(got, ",") != strings.Join(tt.wantIDs, ",") {
				t.Errorf("ids = %v, want %v", got, tt.wantIDs)
			}
			var names []string
			var kinds []AttachmentKind
			for _, a := range atts {
				names = append(names, a.Name)
				kinds = append(kinds, a.Kind)
				if (a.Ref.File != nil) != tt.wantEnc {
					t.Errorf("%s encrypted = %v, want %v", a.Name, a.Ref.File != nil, tt.wantEnc)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.wantNames) || fmt.Sprint(kinds) != fmt.Sprint(tt.wantKinds) {
				t.Errorf("names %v kinds %v, want %v %v", names, kinds, tt.wantNames, tt.wantKinds)
			}
		})
	}
}
