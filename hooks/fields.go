package hooks

import "encoding/json"

// MutableField is one designated mutable field of a context type: a field a
// hook may change and the engine keeps when the hook succeeds in time. The
// fields are defined once per context type (below) and used both by the
// engine's merge of a hook's copy and by the process plugin protocol
// (plugins/process/protocol), which carries exactly these fields back from
// a plugin's answer. A context type without designated fields can only be
// observed.
type MutableField struct {
	// Path is the field's JSON path in the context: "suppress",
	// "draft.text".
	Path string
	// Nullable says that a JSON null in a plugin's answer clears the field;
	// a null for any other field leaves it as it was.
	Nullable bool

	get  func(Context) any
	take func(dst, src Context)
}

// Value returns the field's value in c, a context of the field's type.
func (f MutableField) Value(c Context) any { return f.get(c) }

// Take sets the field of dst from src, both contexts of the field's type:
// what the engine does with a hook's copy after the hook succeeded (a
// collector's items are appended to those of earlier hooks).
func (f MutableField) Take(dst, src Context) { f.take(dst, src) }

// MutableFields returns the designated mutable fields of c's type, nil for
// a type whose hooks can only observe.
func MutableFields(c Context) []MutableField {
	if m, ok := c.(interface{ mutableFields() []MutableField }); ok {
		return m.mutableFields()
	}
	return nil
}

// field defines a designated mutable field of context type T.
func field[T any](path string, nullable bool, get func(*T) any, take func(dst, src *T)) MutableField {
	return MutableField{
		Path: path, Nullable: nullable,
		get:  func(c Context) any { return get(any(c).(*T)) },
		take: func(dst, src Context) { take(any(dst).(*T), any(src).(*T)) },
	}
}

// mergeFields takes every designated mutable field of src into dst, fields
// being the table of their type (the merge of each context type passes its
// own, which spares the engine an interface lookup per merge).
func mergeFields(fields []MutableField, dst, src Context) {
	for _, f := range fields {
		f.take(dst, src)
	}
}

var (
	receivedFields = []MutableField{
		field("suppress", false,
			func(c *MessageReceivedContext) any { return c.Suppress },
			func(d, s *MessageReceivedContext) { d.Suppress = s.Suppress }),
	}
	claimFields = []MutableField{
		field("claimed", false,
			func(c *MessageClaimContext) any { return c.Claimed },
			func(d, s *MessageClaimContext) { d.Claimed = s.Claimed }),
	}
	messageEnrichFields = []MutableField{
		field("items", false,
			func(c *MessageEnrichContext) any { return c.Items },
			func(d, s *MessageEnrichContext) { d.Items = append(d.Items, s.Items...) }),
	}
	systemEnrichFields = []MutableField{
		field("items", false,
			func(c *SystemEnrichContext) any { return c.Items },
			func(d, s *SystemEnrichContext) { d.Items = append(d.Items, s.Items...) }),
	}
	beforeResponseFields = []MutableField{
		field("draft.text", false,
			func(c *BeforeResponseContext) any { return c.Draft.Text },
			func(d, s *BeforeResponseContext) { d.Draft.Text = s.Draft.Text }),
		field("draft.extra", true,
			func(c *BeforeResponseContext) any { return nullIfEmpty(c.Draft.Extra) },
			func(d, s *BeforeResponseContext) { d.Draft.Extra = nilIfNull(s.Draft.Extra) }),
		field("draft.tool_trace", true,
			func(c *BeforeResponseContext) any { return c.Draft.ToolTrace },
			func(d, s *BeforeResponseContext) { d.Draft.ToolTrace = s.Draft.ToolTrace }),
		field("draft.suppress", false,
			func(c *BeforeResponseContext) any { return c.Draft.Suppress },
			func(d, s *BeforeResponseContext) { d.Draft.Suppress = s.Draft.Suppress }),
	}
	finalResponseFields = []MutableField{
		field("draft.text", false,
			func(c *FinalResponseContext) any { return c.Draft.Text },
			func(d, s *FinalResponseContext) { d.Draft.Text = s.Draft.Text }),
	}
	scheduleFiredFields = []MutableField{
		field("message_text", false,
			func(c *ScheduleFiredContext) any { return c.MessageText },
			func(d, s *ScheduleFiredContext) { d.MessageText = s.MessageText }),
		field("suppress", false,
			func(c *ScheduleFiredContext) any { return c.Suppress },
			func(d, s *ScheduleFiredContext) { d.Suppress = s.Suppress }),
	}
	toolBeforeCallFields = []MutableField{
		field("declined", false,
			func(c *ToolBeforeCallContext) any { return c.Declined },
			func(d, s *ToolBeforeCallContext) { d.Declined = s.Declined }),
		field("decline_reason", false,
			func(c *ToolBeforeCallContext) any { return c.DeclineReason },
			func(d, s *ToolBeforeCallContext) { d.DeclineReason = s.DeclineReason }),
		field("approval_required", false,
			func(c *ToolBeforeCallContext) any { return c.ApprovalRequired },
			func(d, s *ToolBeforeCallContext) { d.ApprovalRequired = s.ApprovalRequired }),
		field("approval_reason", false,
			func(c *ToolBeforeCallContext) any { return c.ApprovalReason },
			func(d, s *ToolBeforeCallContext) { d.ApprovalReason = s.ApprovalReason }),
	}
	pluginInstallFields = []MutableField{
		field("declined", false,
			func(c *PluginInstallContext) any { return c.Declined },
			func(d, s *PluginInstallContext) { d.Declined = s.Declined }),
		field("decline_reason", false,
			func(c *PluginInstallContext) any { return c.DeclineReason },
			func(d, s *PluginInstallContext) { d.DeclineReason = s.DeclineReason }),
	}
	modelResolveFields = []MutableField{
		field("model", false,
			func(c *ModelResolveContext) any { return c.Model },
			func(d, s *ModelResolveContext) { d.Model = s.Model }),
	}
	modelRequestFields = []MutableField{
		field("messages", false,
			func(c *ModelRequestContext) any { return c.Messages },
			func(d, s *ModelRequestContext) { d.Messages = s.Messages }),
		field("tools", true,
			func(c *ModelRequestContext) any { return c.Tools },
			func(d, s *ModelRequestContext) { d.Tools = s.Tools }),
		field("refused", false,
			func(c *ModelRequestContext) any { return c.Refused },
			func(d, s *ModelRequestContext) { d.Refused = s.Refused }),
		field("refuse_reason", false,
			func(c *ModelRequestContext) any { return c.RefuseReason },
			func(d, s *ModelRequestContext) { d.RefuseReason = s.RefuseReason }),
	}
	toolResultFields = []MutableField{
		field("content", false,
			func(c *ToolResultContext) any { return c.Content },
			func(d, s *ToolResultContext) { d.Content = s.Content }),
	}
	memoryExtractedFields = []MutableField{
		field("memories", false,
			func(c *MemoryExtractedContext) any { return c.Memories },
			func(d, s *MemoryExtractedContext) { d.Memories = s.Memories }),
		field("vetoed", false,
			func(c *MemoryExtractedContext) any { return c.Vetoed },
			func(d, s *MemoryExtractedContext) { d.Vetoed = s.Vetoed }),
		field("veto_reason", false,
			func(c *MemoryExtractedContext) any { return c.VetoReason },
			func(d, s *MemoryExtractedContext) { d.VetoReason = s.VetoReason }),
	}
	approvalRequestedFields = []MutableField{
		field("decision", false,
			func(c *ToolApprovalRequestedContext) any { return c.Decision },
			func(d, s *ToolApprovalRequestedContext) { d.Decision = s.Decision }),
		field("decision_reason", false,
			func(c *ToolApprovalRequestedContext) any { return c.DecisionReason },
			func(d, s *ToolApprovalRequestedContext) { d.DecisionReason = s.DecisionReason }),
	}
)

func (*MessageReceivedContext) mutableFields() []MutableField       { return receivedFields }
func (*MessageClaimContext) mutableFields() []MutableField          { return claimFields }
func (*MessageEnrichContext) mutableFields() []MutableField         { return messageEnrichFields }
func (*SystemEnrichContext) mutableFields() []MutableField          { return systemEnrichFields }
func (*BeforeResponseContext) mutableFields() []MutableField        { return beforeResponseFields }
func (*FinalResponseContext) mutableFields() []MutableField         { return finalResponseFields }
func (*ScheduleFiredContext) mutableFields() []MutableField         { return scheduleFiredFields }
func (*ToolBeforeCallContext) mutableFields() []MutableField        { return toolBeforeCallFields }
func (*ToolApprovalRequestedContext) mutableFields() []MutableField { return approvalRequestedFields }
func (*PluginInstallContext) mutableFields() []MutableField         { return pluginInstallFields }
func (*ModelResolveContext) mutableFields() []MutableField          { return modelResolveFields }
func (*ModelRequestContext) mutableFields() []MutableField          { return modelRequestFields }
func (*ToolResultContext) mutableFields() []MutableField            { return toolResultFields }
func (*MemoryExtractedContext) mutableFields() []MutableField       { return memoryExtractedFields }

// nullIfEmpty shows an empty raw JSON value as null.
func nullIfEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// nilIfNull reads a raw JSON null (a plugin clearing the field) as empty.
func nilIfNull(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}
