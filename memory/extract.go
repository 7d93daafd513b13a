package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/internal/runes"
)

// Limits of an extraction answer. An answer beyond them is refused whole.
const (
	MaxCandidates      = 8        // facts per turn
	MaxExtractionBytes = 16 << 10 // the answer's size
	maxTurnText        = 8 << 10  // bytes of the user text and of the reply put in the request
	maxKnownInRequest  = 30       // known memories listed in the request
)

// Candidate is one fact the model proposes to remember about the person
// after a turn. The bot emits memory:extracted with the candidates (a hook
// may drop or veto them) and then calls StoreCandidates.
type Candidate struct {
	Text string `json:"text"`
}

// ExtractionTurn is what extraction looks at: the person's message, the
// agent's reply, and what is already remembered about them (so the model
// does not propose it again).
type ExtractionTurn struct {
	UserText string
	Reply    string
	Known    []Memory
}

// ExtractionSchema is the JSON schema of an extraction answer.
var ExtractionSchema = json.RawMessage(`{"type":"object","properties":{"memories":{"type":"array","items":{"type":"object",` +
	`"properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}}},` +
	`"required":["memories"],"additionalProperties":false}`)

const extractionPrompt = `You extract long-term memories from one exchange between a person and an assistant.
Return the durable facts about the person worth remembering in later conversations: preferences, facts about
their life, work, people and things they care about, and anything they explicitly ask to be remembered.
Leave out small talk, the assistant's own statements, one-off requests, secrets such as passwords or keys,
and anything already known (listed below). Write each fact as one short, self-contained sentence about "the
person" in the language they used. Most exchanges have nothing worth remembering: then answer with an empty list.
Answer with JSON only: {"memories":[{"text":"..."}]}, at most ` + "8" + ` items.`

// ExtractionRequest builds the request the bot sends to the agent's model
// after a turn (when the agent's memory has extract: true): a system prompt,
// the exchange as data, and a strict JSON schema for the answer. Parse the
// model's reply with ParseExtraction.
func ExtractionRequest(t ExtractionTurn) agents.Request {
	var b strings.Builder
	b.WriteString("Already known:\n")
	if len(t.Known) == 0 {
		b.WriteString("(nothing)\n")
	}
	for i, m := range t.Known {
		if i == maxKnownInRequest {
			break
		}
		b.WriteString("- " + m.Text + "\n")
	}
	exchange, _ := json.Marshal(struct {
		Person    string `json:"person"`
		Assistant string `json:"assistant"`
	}{runes.Cut(t.UserText, maxTurnText), runes.Cut(t.Reply, maxTurnText)})
	b.WriteString("\nThe exchange (JSON):\n")
	b.Write(exchange)
	temp := float32(0)
	return agents.Request{
		Messages: []agents.Message{
			{Role: agents.RoleSystem, Content: extractionPrompt},
			{Role: agents.RoleUser, Content: b.String()},
		},
		MaxTokens:      1024,
		Temperature:    &temp,
		ResponseSchema: &agents.ResponseSchema{Name: "memories", Schema: ExtractionSchema, Strict: true},
	}
}

// ErrBadExtraction wraps every reason ParseExtraction refuses an answer.
var ErrBadExtraction = errors.New("invalid memory extraction answer")

// ParseExtraction reads the model's answer to ExtractionRequest: one JSON
// object {"memories":[{"text":"…"}]} (a surrounding Markdown code fence is
// tolerated, since servers without structured output add one). It refuses
// the whole answer — nothing is to be stored — when it is not that object,
// is larger than MaxExtractionBytes, has more than MaxCandidates items, or an
// item's text is empty or longer than maxText characters (maxText <= 0:
// DefaultMaxTextLength). Texts are normalized (Normalize) and duplicates
// dropped; an empty list is a valid answer.
func ParseExtraction(answer string, maxText int) ([]Candidate, error) {
	if maxText <= 0 {
		maxText = DefaultMaxTextLength
	}
	if len(answer) > MaxExtractionBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrBadExtraction, len(answer), MaxExtractionBytes)
	}
	body := strings.TrimSpace(answer)
	if strings.HasPrefix(body, "```") {
		body = strings.TrimPrefix(strings.TrimPrefix(body, "```json"), "```")
		body = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(body), "```"))
	}
	var a struct {
		Memories *[]struct {
			Text *string `json:"text"`
		} `json:"memories"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("%w: not the JSON object {\"memories\":[{\"text\":…}]}: %v", ErrBadExtraction, err)
	}
	if strings.TrimSpace(body[dec.InputOffset():]) != "" {
		return nil, fmt.Errorf("%w: text after the JSON object", ErrBadExtraction)
	}
	if a.Memories == nil {
		return nil, fmt.Errorf("%w: no \"memories\" list", ErrBadExtraction)
	}
	if n := len(*a.Memories); n > MaxCandidates {
		return nil, fmt.Errorf("%w: %d memories, more than %d", ErrBadExtraction, n, MaxCandidates)
	}
	var out []Candidate
	for i, m := range *a.Memories {
		if m.Text == nil {
			return nil, fmt.Errorf("%w: memory %d has no text", ErrBadExtraction, i)
		}
		text := Normalize(*m.Text, 0)
		switch {
		case text == "":
			return nil, fmt.Errorf("%w: memory %d is empty", ErrBadExtraction, i)
		case utf8.RuneCountInString(text) > maxText:
			return nil, fmt.Errorf("%w: memory %d is longer than %d characters", ErrBadExtraction, i, maxText)
		}
		dup := false
		for _, c := range out {
			dup = dup || c.Text == text
		}
		if !dup {
			out = append(out, Candidate{Text: text})
		}
	}
	return out, nil
}

// StoreCandidates remembers the candidates (what memory:extracted hooks let
// through) as person memories of who, with source SourceExtracted, and
// returns the ones it stored anew (already remembered texts are skipped).
// It stops at the first error; what was stored before it stays.
func (s *Store) StoreCandidates(ctx context.Context, who Who, candidates []Candidate) ([]Memory, error) {
	var stored []Memory
	for _, c := range candidates {
		m, created, err := s.Remember(ctx, who, ScopePerson, c.Text, SourceExtracted)
		if err != nil {
			return stored, err
		}
		if created {
			stored = append(stored, m)
		}
	}
	return stored, nil
}
