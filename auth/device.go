package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"
)

// A device token tells a login that this device has logged in to the
// account before, so that rate limits aimed at guessers need not lock the
// owner out (httpapi's login). It is a MAC over the user id and the time of
// issue, keyed by the account's password hash: the server keeps no new
// secret and no table, every node can check it, nobody without the hash
// can forge one, and changing the password revokes them all.
//
// It grants nothing by itself: it is not a session and the password is
// still needed.

const (
	deviceMACLen = 16 // 128 bits is plenty for a MAC nobody can query offline
	deviceLen    = 8 + deviceMACLen
)

// DeviceToken returns a device token for userID, issued at now.
func DeviceToken(passwordHash, userID string, now time.Time) string {
	b := make([]byte, 8, deviceLen)
	binary.BigEndian.PutUint64(b, uint64(now.Unix()))
	b = append(b, deviceMAC(passwordHash, userID, b[:8])...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// VerifyDeviceToken reports whether token was issued for userID under
// passwordHash, no earlier than maxAge before now and not in the future.
func VerifyDeviceToken(token, passwordHash, userID string, now time.Time, maxAge time.Duration) bool {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != deviceLen {
		return false
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(b[:8])), 0)
	if issued.After(now.Add(time.Minute)) || now.Sub(issued) > maxAge {
		return false
	}
	return hmac.Equal(b[8:], deviceMAC(passwordHash, userID, b[:8]))
}

func deviceMAC(passwordHash, userID string, issued []byte) []byte {
	key := sha256.Sum256([]byte("parley device token\x00" + passwordHash))
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(userID))
	m.Write([]byte{0})
	m.Write(issued)
	return m.Sum(nil)[:deviceMACLen]
}
