//! Just enough RESP2 to poke at a server from tests, so the harness does not
//! depend on (or test itself with) the Redis client crate under test.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One reply. Error replies are values, not `Err`, because tests often want
/// to assert on them; `Err` is reserved for I/O and protocol failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespValue {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<RespValue>),
}

impl RespValue {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            RespValue::Integer(n) => Some(*n),
            _ => None,
        }
    }

    /// Simple and bulk strings both, since which one Redis uses is an
    /// implementation detail tests should not care about.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            RespValue::Simple(s) => Some(s.as_bytes()),
            RespValue::Bulk(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, RespValue::Error(_))
    }
}

/// A blocking connection. Every read and write has a timeout so a frozen or
/// dead server makes a test fail instead of hang.
pub struct Connection {
    reader: BufReader<TcpStream>,
}

impl Connection {
    pub fn open(addr: SocketAddr, password: Option<&str>, timeout: Duration) -> io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let mut conn = Connection {
            reader: BufReader::new(stream),
        };
        if let Some(pw) = password {
            match conn.command(&[b"AUTH", pw.as_bytes()])? {
                RespValue::Simple(_) => {}
                other => return Err(io::Error::other(format!("AUTH failed: {other:?}"))),
            }
        }
        Ok(conn)
    }

    pub fn command(&mut self, args: &[&[u8]]) -> io::Result<RespValue> {
        self.reader.get_mut().write_all(&encode(args))?;
        read_value(&mut self.reader)
    }

    /// Several commands in one write and one round trip; their replies, in order.
    pub fn pipeline(&mut self, commands: &[Vec<&[u8]>]) -> io::Result<Vec<RespValue>> {
        let out: Vec<u8> = commands.iter().flat_map(|args| encode(args)).collect();
        self.reader.get_mut().write_all(&out)?;
        commands
            .iter()
            .map(|_| read_value(&mut self.reader))
            .collect()
    }
}

pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

pub fn read_value(r: &mut impl BufRead) -> io::Result<RespValue> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_first().ok_or_else(|| bad("empty reply line"))?;
    let text = String::from_utf8_lossy(rest).into_owned();
    let int = || {
        text.parse::<i64>()
            .map_err(|_| bad(&format!("bad integer {text:?}")))
    };
    Ok(match kind {
        b'+' => RespValue::Simple(text),
        b'-' => RespValue::Error(text),
        b':' => RespValue::Integer(int()?),
        b'$' => match usize::try_from(int()?) {
            Err(_) => RespValue::Nil,
            Ok(len) => {
                let mut buf = vec![0; len + 2];
                r.read_exact(&mut buf)?;
                buf.truncate(len);
                RespValue::Bulk(buf)
            }
        },
        b'*' => match usize::try_from(int()?) {
            Err(_) => RespValue::Nil,
            Ok(n) => RespValue::Array((0..n).map(|_| read_value(r)).collect::<io::Result<_>>()?),
        },
        other => return Err(bad(&format!("unknown reply type {:?}", *other as char))),
    })
}

fn read_line(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed mid-reply",
        ));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_replies() {
        let raw = b"*4\r\n+OK\r\n:-7\r\n$-1\r\n*2\r\n$3\r\nfoo\r\n-ERR x\r\n";
        let v = read_value(&mut &raw[..]).unwrap();
        assert_eq!(
            v,
            RespValue::Array(vec![
                RespValue::Simple("OK".into()),
                RespValue::Integer(-7),
                RespValue::Nil,
                RespValue::Array(vec![
                    RespValue::Bulk(b"foo".to_vec()),
                    RespValue::Error("ERR x".into())
                ]),
            ])
        );
    }

    #[test]
    fn encodes_binary_safe_bulk_strings() {
        assert_eq!(
            encode(&[b"SET", b"k\r\n"]),
            b"*2\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n".to_vec()
        );
    }

    #[test]
    fn truncated_reply_is_an_error() {
        assert!(read_value(&mut &b"$5\r\nab"[..]).is_err());
        assert!(read_value(&mut &b"+OK"[..]).is_err());
    }
}
