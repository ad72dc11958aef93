package agui

import (
	"encoding/json"
	"strings"
)

// MaxTitleRunes bounds the title Title derives.
const MaxTitleRunes = 100

// Title derives a thread title from a run's messages: the text of the first user message
// (a string content, or the text parts of a content array), whitespace collapsed, cut to
// MaxTitleRunes runes with "…" when longer. "" when no user message has text.
func Title(messages []json.RawMessage) string {
	for _, m := range messages {
		var msg struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m, &msg) != nil || msg.Role != "user" {
			continue
		}
		if t := cutTitle(contentText(msg.Content)); t != "" {
			return t
		}
	}
	return ""
}

// contentText returns a message content's text: the string, or the text parts of an array.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" && p.Text != "" {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func cutTitle(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	r := []rune(s)
	if len(r) > MaxTitleRunes {
		return string(r[:MaxTitleRunes-1]) + "…"
	}
	return s
}
