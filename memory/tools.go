package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hookroom/hookroom/agents"
)

// Names of the memory tools.
const (
	ToolRemember = "remember"
	ToolRecall   = "recall"
	ToolForget   = "forget"
)

// Tools returns the remember, recall and forget tools, bound to s. Each call
// acts for the agent, room and person of the tool call (agents.ToolCallFrom):
// the model can only ever remember for, recall and forget what the person it
// is answering may (see Store), whatever arguments it makes up. encrypted
// tells which rooms are end-to-end encrypted (nil: none). Give them to the
// agents whose memory is enabled; a call for an agent without memory fails
// with a message the model sees.
func Tools(s *Store, encrypted EncryptedFunc) []agents.Tool {
	specs := ToolSpecs()
	out := make([]agents.Tool, len(specs))
	for i, spec := range specs {
		out[i] = agents.NewTool(spec, func(ctx context.Context, raw json.RawMessage) (string, error) {
			who, err := toolWho(ctx, encrypted)
			if err != nil {
				return "", err
			}
			return s.CallTool(ctx, who, spec.Name, raw)
		})
	}
	return out
}

// ToolSpecs describes the remember, recall and forget tools to the model,
// in that order.
func ToolSpecs() []agents.ToolSpec {
	return []agents.ToolSpec{
		{
			Name: ToolRemember,
			Description: "Remember a durable fact for later conversations: something the person wants you to remember, " +
				"a preference, a fact about them. scope person (default) keeps it for this person only, in every room; " +
				"room keeps it for everyone in this room; agent keeps it for everyone you talk to (if enabled). " +
				"Write one short, self-contained sentence.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"text":{"type":"string","description":"the fact, one self-contained sentence"},` +
				`"scope":{"type":"string","enum":["person","room","agent"],"description":"whose memory it is (default person)"}},` +
				`"required":["text"],"additionalProperties":false}`),
		},
		{
			Name: ToolRecall,
			Description: "Search what you remember about the person you are talking to, this room, and in general. " +
				"Relevant memories are already given to you with each message; use this to look for something else.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","description":"what to look for, in words"},` +
				`"limit":{"type":"integer","minimum":1,"maximum":20,"description":"how many memories at most (default 5)"}},` +
				`"required":["query"],"additionalProperties":false}`),
		},
		{
			Name: ToolForget,
			Description: "Forget a memory by its id (the [id] shown with remembered facts), for good. " +
				"You can forget the person's own memories and the room or general memories they told you.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"id":{"type":"string","description":"the memory's id, e.g. mab3k9xq2"}},` +
				`"required":["id"],"additionalProperties":false}`),
		},
	}
}

// CallTool runs one call of the tool called name (ToolRemember, ToolRecall
// or ToolForget) with the model's arguments raw, for who — which the caller
// takes from the tool call (its agent, requester and room), never from the
// arguments. It returns what the model sees.
func (s *Store) CallTool(ctx context.Context, who Who, name string, raw json.RawMessage) (string, error) {
	switch name {
	case ToolRemember:
		var a struct {
			Text  string `json:"text"`
			Scope Scope  `json:"scope"`
		}
		if err := decodeArgs(raw, &a); err != nil {
			return "", err
		}
		if a.Scope == "" {
			a.Scope = ScopePerson
		}
		m, created, err := s.Remember(ctx, who, a.Scope, a.Text, SourceTool)
		if err != nil {
			return "", err
		}
		return toolJSON(map[string]any{"id": m.ID, "scope": m.Scope, "text": m.Text, "already_remembered": !created})
	case ToolRecall:
		var a struct {
			Query string `json:"query"`
			Limit int    `json:"limit"`
		}
		if err := decodeArgs(raw, &a); err != nil {
			return "", err
		}
		if !s.Options(who.Agent).Enabled {
			return "", fmt.Errorf("%w for agent %s", ErrDisabled, who.Agent)
		}
		mems, err := s.Recall(ctx, who, a.Query, min(max(a.Limit, 0), 20))
		if err != nil {
			return "", err
		}
		type item struct {
			ID    string `json:"id"`
			Scope Scope  `json:"scope"`
			Text  string `json:"text"`
		}
		out := make([]item, len(mems))
		for i, m := range mems {
			out[i] = item{m.ID, m.Scope, m.Text}
		}
		return toolJSON(map[string]any{"memories": out})
	case ToolForget:
		var a struct {
			ID string `json:"id"`
		}
		if err := decodeArgs(raw, &a); err != nil {
			return "", err
		}
		if err := s.Forget(ctx, who, a.ID); errors.Is(err, ErrNotFound) {
			return "", fmt.Errorf("no memory %q that this person may forget", a.ID)
		} else if err != nil {
			return "", err
		}
		return toolJSON(map[string]any{"forgotten": a.ID})
	}
	return "", fmt.Errorf("unknown memory tool %q", name)
}

// toolWho is the Who of a tool call: its agent, requester and room.
func toolWho(ctx context.Context, encrypted EncryptedFunc) (Who, error) {
	call, ok := agents.ToolCallFrom(ctx)
	if !ok || call.Agent == "" {
		return Who{}, errors.New("memory tools only run inside an agent's tool call")
	}
	return Who{Agent: call.Agent, Person: call.RequesterID, Room: call.RoomID, Encrypted: encrypted.is(ctx, call.RoomID)}, nil
}

func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

func toolJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("failed to encode the result: %w", err)
	}
	return string(b), nil
}
