package auth

import (
	"strings"
	"testing"
	"time"
)

func TestPasswordRoundTrip(t *testing.T) {
	h, err := HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q does not carry the expected parameters", h)
	}
	ok, err := VerifyPassword(h, "correct horse battery")
	if err != nil || !ok {
		t.Fatalf("right password: ok=%v err=%v", ok, err)
	}
	ok, err = VerifyPassword(h, "correct horse battery!")
	if err != nil || ok {
		t.Fatalf("wrong password: ok=%v err=%v", ok, err)
	}
	h2, _ := HashPassword("correct horse battery")
	if h2 == h {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
	if _, err := VerifyPassword("$2a$10$bcrypt", "x"); err == nil {
		t.Fatal("a non-argon2id hash verified without error")
	}
}

func TestTokens(t *testing.T) {
	tok, hash, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 43 {
		t.Fatalf("token length %d, want 43 (32 bytes base64url)", len(tok))
	}
	if HashToken(tok) != hash || hash == tok {
		t.Fatal("HashToken does not match the hash NewToken returned")
	}
	tok2, _, _ := NewToken()
	if tok2 == tok {
		t.Fatal("two tokens are equal")
	}
}

func TestDeviceToken(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	hash, err := HashPassword("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	tok := DeviceToken(hash, "U1", now)
	year := 365 * 24 * time.Hour
	if !VerifyDeviceToken(tok, hash, "U1", now.Add(time.Hour), year) {
		t.Fatal("fresh token refused")
	}
	other, _ := HashPassword("correct horse battery staple")
	flipped := []byte(tok)
	if flipped[len(flipped)-1] != 'A' { // another base64 letter
		flipped[len(flipped)-1] = 'A'
	} else {
		flipped[len(flipped)-1] = 'B'
	}
	for name, ok := range map[string]bool{
		"other user":        VerifyDeviceToken(tok, hash, "U2", now, year),
		"password changed":  VerifyDeviceToken(tok, other, "U1", now, year),
		"expired":           VerifyDeviceToken(tok, hash, "U1", now.Add(year+time.Hour), year),
		"from the future":   VerifyDeviceToken(tok, hash, "U1", now.Add(-time.Hour), year),
		"truncated":         VerifyDeviceToken(tok[:len(tok)-2], hash, "U1", now, year),
		"not base64":        VerifyDeviceToken("!!!", hash, "U1", now, year),
		"flipped last char": VerifyDeviceToken(string(flipped), hash, "U1", now, year),
	} {
		if ok {
			t.Errorf("%s: accepted", name)
		}
	}
}
