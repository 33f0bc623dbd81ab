package bot

import (
	"strings"
	"testing"
)

// BenchmarkParseCommandsHostile measures the worst comments a commenter can
// post (patterns that made full Markdown parsing superlinear).
func BenchmarkParseCommandsHostile(b *testing.B) {
	for name, pat := range map[string]string{"emphasis": "*a_", "quotes": ">", "links": "[a](", "stars": "*a", "lists": "- ", "ordered": "1. ", "quote-lines": ">\n", "backticks": "`a"} {
		body := "/verify\n" + strings.Repeat(pat, (maxCommentScan-16)/len(pat))
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				ParseCommands(body)
			}
		})
	}
}
