package recorder

import "crypto/rand"

// NewEpoch returns a random epoch: EpochLength characters of lower-case base32 (40 bits).
func NewEpoch() string {
	var b [EpochLength]byte
	rand.Read(b[:]) // never fails (crypto/rand documents it panics instead)
	for i := range b {
		b[i] = epochAlphabet[b[i]&31]
	}
	return string(b[:])
}
