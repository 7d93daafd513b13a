package config

import (
	"fmt"
	"strings"
)

// diffContext is how many unchanged lines DiffText shows around a change.
const diffContext = 3

// maxDiffCells bounds the work of DiffText's line matching: the product of
// the line counts of the changed middle parts (after the common beginning
// and end are set aside). Beyond it the middle is shown as removed and
// added whole: still a correct diff, only not the smallest.
const maxDiffCells = 4_000_000

// DiffText returns a unified diff of two texts by lines, for a preview:
// hunks of "@@ -l,n +l,n @@" followed by " " (unchanged, up to 3 lines
// around each change), "-" (removed) and "+" (added) lines, without the
// "---"/"+++" file header; "" when the texts are equal. A missing final
// newline is marked "\ No newline at end of file". It finds the smallest
// diff (longest common subsequence) unless the changed part of the file is
// very large (thousands of lines changed on both sides), where it shows
// that part as replaced whole. It does not mask secrets: diff masked texts,
// or mask the result, before showing it.
func DiffText(old, new []byte) string {
	a, b := splitLines(string(old)), splitLines(string(new))
	ops := diffLines(a, b)
	return formatUnified(ops, a, b)
}

// splitLines splits s into lines, each with its "\n" (the last may have
// none).
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

type diffOp struct {
	kind byte // ' ', '-' or '+'
	a, b int  // line indexes in a (for ' ' and '-') and b (for ' ' and '+')
}

// diffLines returns the edit script turning a into b.
func diffLines(a, b []string) []diffOp {
	var ops []diffOp
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		ops = append(ops, diffOp{' ', pre, pre})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if n > 0 && m > 0 && n*m <= maxDiffCells {
		// lcs[i][j]: length of the LCS of ma[i:] and mb[j:].
		lcs := make([][]int32, n+1)
		for i := range lcs {
			lcs[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				ops = append(ops, diffOp{' ', pre + i, pre + j})
				i++
				j++
			case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
				ops = append(ops, diffOp{'+', -1, pre + j})
				j++
			default:
				ops = append(ops, diffOp{'-', pre + i, -1})
				i++
			}
		}
	} else {
		for i := range n {
			ops = append(ops, diffOp{'-', pre + i, -1})
		}
		for j := range m {
			ops = append(ops, diffOp{'+', -1, pre + j})
		}
	}
	for k := range suf {
		ops = append(ops, diffOp{' ', len(a) - suf + k, len(b) - suf + k})
	}
	return ops
}

func formatUnified(ops []diffOp, a, b []string) string {
	var out strings.Builder
	for start := 0; start < len(ops); {
		// The next change.
		for start < len(ops) && ops[start].kind == ' ' {
			start++
		}
		if start == len(ops) {
			break
		}
		// The hunk runs from diffContext lines before it to diffContext
		// lines after the last change that is at most 2*diffContext
		// unchanged lines from the one before.
		first := max(start-diffContext, 0)
		end := start
		for k := start; k < len(ops); k++ {
			if ops[k].kind != ' ' {
				end = k + 1
				continue
			}
			if k-end >= 2*diffContext {
				break
			}
		}
		last := min(end+diffContext, len(ops))
		writeHunk(&out, ops[first:last], a, b)
		start = last
	}
	return out.String()
}

func writeHunk(out *strings.Builder, ops []diffOp, a, b []string) {
	aStart, bStart, aLen, bLen := -1, -1, 0, 0
	for _, op := range ops {
		if op.a >= 0 {
			if aStart < 0 {
				aStart = op.a
			}
			aLen++
		}
		if op.b >= 0 {
			if bStart < 0 {
				bStart = op.b
			}
			bLen++
		}
	}
	// A side with no lines in a hunk is an empty file (any other hunk has
	// context lines on both sides): it is numbered 0.
	aStart++
	bStart++
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
	for _, op := range ops {
		var line string
		if op.kind == '+' {
			line = b[op.b]
		} else {
			line = a[op.a]
		}
		out.WriteByte(op.kind)
		out.WriteString(strings.TrimSuffix(line, "\n"))
		out.WriteByte('\n')
		if !strings.HasSuffix(line, "\n") { // only a last line lacks it
			out.WriteString("\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
