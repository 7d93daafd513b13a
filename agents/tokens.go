package agents

import "unicode/utf8"

// Token estimates. hookroom has no tokenizer for the models it talks to, so
// it estimates, on the generous side:
//
//   - text: one token per 4 ASCII bytes (rounded up), plus one token per
//     non-ASCII character (CJK and most non-Latin scripts come close to a
//     token per character; accented Latin text is over-estimated);
//   - each message adds MessageOverheadTokens for its role and framing;
//   - each tool call adds its id, name and arguments as text, plus
//     MessageOverheadTokens.
//
// Compaction compares these estimates with the history budget, so an
// over-estimate only compacts a little early.
const MessageOverheadTokens = 4

// EstimateTextTokens estimates the tokens of s (see the heuristic above).
func EstimateTextTokens(s string) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		other++
		i += size
	}
	return (ascii+3)/4 + other
}

// EstimateTokens estimates the tokens msgs take in a request.
func EstimateTokens(msgs ...Message) int {
	n := 0
	for i := range msgs {
		m := &msgs[i]
		n += MessageOverheadTokens + EstimateTextTokens(m.Content) + EstimateTextTokens(m.Name) + EstimateTextTokens(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			n += MessageOverheadTokens + EstimateTextTokens(tc.ID) + EstimateTextTokens(tc.Name) + EstimateTextTokens(tc.Arguments)
		}
	}
	return n
}
