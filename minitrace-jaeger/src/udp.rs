//! The agent transport: one `emitBatch` message per UDP datagram.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// A UDP socket connected to a Jaeger agent.
///
/// Connecting lets the kernel report an unreachable agent: after a datagram
/// is refused (ICMP port unreachable), the next `send` fails with
/// `ConnectionRefused`. Both datagrams are lost by then: the refused one
/// was counted sent, and is then counted lost.
#[derive(Debug)]
pub(crate) struct Agent {
    socket: UdpSocket,
    /// Spans in the last datagram that was handed to the kernel.
    last_sent_spans: usize,
}

/// A datagram that did not go out.
pub(crate) struct SendError {
    /// When the agent refused the previous datagram: the spans it carried,
    /// which were counted sent and are lost as well.
    pub(crate) refused_before: usize,
    pub(crate) error: io::Error,
}

impl Agent {
    pub(crate) fn connect(agent: SocketAddr, timeout: Duration) -> io::Result<Agent> {
        let local: SocketAddr = if agent.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(local)?;
        socket.connect(agent)?;
        // A datagram send blocks only while the socket's send buffer is full.
        socket.set_write_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        Ok(Agent { socket, last_sent_spans: 0 })
    }

    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.socket.set_write_timeout(Some(timeout.max(Duration::from_millis(1))))
    }

    /// Sends one datagram carrying `spans` spans.
    pub(crate) fn send(&mut self, datagram: &[u8], spans: usize) -> Result<(), SendError> {
        match self.socket.send(datagram) {
            Ok(sent) if sent == datagram.len() => {
                self.last_sent_spans = spans;
                Ok(())
            }
            Ok(sent) => Err(SendError {
                refused_before: 0,
                error: io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("sent {sent} of a {}-byte datagram", datagram.len()),
                ),
            }),
            Err(error) => {
                let mut refused_before = 0;
                if error.kind() == io::ErrorKind::ConnectionRefused {
                    refused_before = std::mem::take(&mut self.last_sent_spans);
                }
                Err(SendError { refused_before, error })
            }
        }
    }
}
