//! Lock tokens: the random value that marks a key as ours, fresh for every acquisition.
//!
//! 160 bits from the thread-local CSPRNG (ChaCha, seeded from the OS), as the reference client
//! does, written as 40 hex digits so it reads well in `redis-cli` and in logs.

use std::fmt;
use std::sync::Arc;

/// Random bytes in one token.
const TOKEN_BYTES: usize = 20;

/// Hex digits in one token.
const TOKEN_DIGITS: usize = TOKEN_BYTES * 2;

/// Hex digits of a token in its release mark (32 bits): the release scripts publish
/// `string.sub(token, 1, 8)`.
pub(crate) const RELEASE_MARK: usize = 8;

/// The value stored under a lock's key, identifying one acquisition.
///
/// Only the holder knows it, so only the holder can release or extend the lock. Cloning is
/// cheap: the digits are held inline (no allocation per acquisition).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Token([u8; TOKEN_DIGITS]);

impl Token {
    /// A fresh, unpredictable token.
    pub(crate) fn generate() -> Self {
        let bytes: [u8; TOKEN_BYTES] = rand::random();
        let mut hex = [0u8; TOKEN_DIGITS];
        for (digits, byte) in hex.chunks_exact_mut(2).zip(bytes) {
            digits.copy_from_slice(&[
                HEX_DIGITS[usize::from(byte >> 4)],
                HEX_DIGITS[usize::from(byte & 0x0f)],
            ]);
        }
        Token(hex)
    }

    /// The token written as [`as_str`](Token::as_str) gives it (40 lowercase hex digits), as a
    /// [`Detached`](crate::Detached) lease carries it to another process; `None` for anything
    /// else.
    pub fn parse(token: &str) -> Option<Token> {
        let digits: [u8; TOKEN_DIGITS] = token.as_bytes().try_into().ok()?;
        digits
            .iter()
            .all(|digit| HEX_DIGITS.contains(digit))
            .then_some(Token(digits))
    }

    /// The first [`RELEASE_MARK`] digits, which a release publishes to the waiters: the nodes'
    /// copies of one release carry the same mark, so a waiter is woken once for it, and a
    /// subscriber learns too little of the token to release or extend the lock.
    pub(crate) fn release_mark(&self) -> &[u8] {
        &self.0[..RELEASE_MARK]
    }

    /// The token as stored in Redis.
    pub fn as_str(&self) -> &str {
        // Always ASCII hex digits: the conversion cannot fail.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Shows only a prefix: a token in a log line should identify a holder, not let a reader
/// release its lock.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let token = self.as_str();
        write!(f, "Token({}…)", token.get(..8).unwrap_or(token))
    }
}

/// The Redis key for a resource: the prefix followed by the resource's bytes, unchanged. For a
/// fixed prefix this is injective, so distinct resources never share a key. One allocation.
pub(crate) fn lock_key(prefix: &[u8], resource: &[u8]) -> Arc<[u8]> {
    prefix.iter().chain(resource).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tokens_are_40_hex_digits_and_distinct() {
        let tokens: HashSet<Token> = (0..1000).map(|_| Token::generate()).collect();
        assert_eq!(tokens.len(), 1000);
        for t in &tokens {
            assert_eq!(t.as_str().len(), 40);
            assert!(t.as_str().bytes().all(|b| HEX_DIGITS.contains(&b)), "{t}");
        }
    }

    #[test]
    fn a_token_parses_back_from_its_digits_and_nothing_else_does() {
        let t = Token::generate();
        assert_eq!(Token::parse(t.as_str()), Some(t.clone()));
        assert_eq!(Token::parse(&"A".repeat(40)), None);
        assert_eq!(Token::parse(&t.as_str()[1..]), None);
        assert_eq!(Token::parse(&format!("{}0", t.as_str())), None);
        assert_eq!(Token::parse(&"g".repeat(40)), None);
        assert_eq!(Token::parse(""), None);
    }

    #[test]
    fn debug_does_not_reveal_the_token() {
        let t = Token::generate();
        assert!(!format!("{t:?}").contains(t.as_str()));
    }

    #[test]
    fn debug_shows_the_first_eight_digits_and_display_the_whole_token() {
        let t = Token::generate();
        let prefix = t.as_str().get(..8).unwrap();
        assert_eq!(format!("{t:?}"), format!("Token({prefix}…)"));
        assert_eq!(t.to_string(), t.as_str());
    }

    #[test]
    fn distinct_resources_get_distinct_keys() {
        let p = b"quorumlock:";
        assert_ne!(lock_key(p, b"ab"), lock_key(p, b"a"));
        assert_ne!(lock_key(p, b"a\0b"), lock_key(p, b"a"));
        assert_eq!(&*lock_key(p, b"x"), b"quorumlock:x");
    }
}
