package sqlstore

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"parley"
)

// Search queries (docs/search.md): what a user types is parsed here into
// terms and rendered into each engine's syntax, never passed through, so
// that no input can make a syntax error or reach an operator. A term is a
// run of letters, digits and combining marks; everything else separates
// terms, as both engines' tokenizers do with the text.
//
//	deploy failed     both words (AND)
//	"deploy failed"   the phrase
//	foo-bar, a.b      a phrase of the word's parts, as in the text
//	deplo             the last word is a prefix (as people type), unless the
//	                  query ends with a space, punctuation or a closing quote

// Limits on a query, checked before any work: a search box, not a document.
const (
	maxSearchQueryLen = 512 // characters
	maxSearchTerms    = 16  // words and phrases
	maxPhraseTokens   = 32
)

// searchTerm is a word (one token) or a phrase (several, in order). Prefix:
// its last token matches any word it begins.
type searchTerm struct {
	tokens []string
	prefix bool
}

// parseSearchQuery splits q into terms. No terms (only punctuation) is not
// an error: nothing matches.
func parseSearchQuery(q string) ([]searchTerm, error) {
	if !utf8.ValidString(q) {
		return nil, parley.Errorf(parley.EINVALID, "q must be valid UTF-8")
	}
	if strings.TrimSpace(q) == "" {
		return nil, parley.Errorf(parley.EINVALID, "q is required")
	}
	if utf8.RuneCountInString(q) > maxSearchQueryLen {
		return nil, parley.Errorf(parley.EINVALID, "q must be at most %d characters", maxSearchQueryLen)
	}
	var terms []searchTerm
	add := func(text string) {
		if toks := searchTokens(text); len(toks) > 0 {
			terms = append(terms, searchTerm{tokens: toks})
		}
	}
	rest := q
	lastOpen := false // the last term is outside quotes and not followed by a space
	for rest != "" {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			for _, w := range strings.Fields(rest) {
				add(w)
			}
			r, _ := utf8.DecodeLastRuneInString(rest)
			lastOpen = isTokenRune(r) // still typing a word
			break
		}
		for _, w := range strings.Fields(rest[:i]) {
			add(w)
		}
		rest = rest[i+1:]
		j := strings.IndexByte(rest, '"')
		if j < 0 { // an unclosed quote runs to the end
			j = len(rest)
		}
		add(rest[:j])
		lastOpen = false
		if j == len(rest) {
			break
		}
		rest = rest[j+1:]
	}
	if len(terms) > maxSearchTerms {
		return nil, parley.Errorf(parley.EINVALID, "q must have at most %d words or phrases", maxSearchTerms)
	}
	for _, t := range terms {
		if len(t.tokens) > maxPhraseTokens {
			return nil, parley.Errorf(parley.EINVALID, "a phrase must have at most %d words", maxPhraseTokens)
		}
	}
	if lastOpen && len(terms) > 0 {
		terms[len(terms)-1].prefix = true
	}
	return terms, nil
}

// searchTokens returns the tokens of s: maximal runs of letters, digits and
// marks.
func searchTokens(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !isTokenRune(r) })
}

func isTokenRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.IsMark(r)
}

// fts5Query renders terms as an FTS5 MATCH expression: every term a quoted
// string (tokens hold no quote, so nothing in them is syntax), a prefix
// marked with *, terms side by side (AND).
func fts5Query(terms []searchTerm) string {
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('"')
		b.WriteString(strings.Join(t.tokens, " "))
		b.WriteByte('"')
		if t.prefix {
			b.WriteByte('*')
		}
	}
	return b.String()
}

// tsQuery renders terms as to_tsquery input: every token a quoted lexeme
// (tokens hold no quote or backslash), a phrase's tokens joined by <->, a
// prefix marked :*, terms joined by &.
func tsQuery(terms []searchTerm) string {
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteString(" & ")
		}
		b.WriteByte('(')
		for j, tok := range t.tokens {
			if j > 0 {
				b.WriteString(" <-> ")
			}
			b.WriteByte('\'')
			b.WriteString(tok)
			b.WriteByte('\'')
			if t.prefix && j == len(t.tokens)-1 {
				b.WriteString(":*")
			}
		}
		b.WriteByte(')')
	}
	return b.String()
}

// lowerToken folds a token's case as PostgreSQL's 'simple' dictionary
// does, to look it up in the planner's statistics.
func lowerToken(tok string) string { return strings.ToLower(tok) }
