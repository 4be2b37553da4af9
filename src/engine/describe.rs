//! Each side says what it runs on and with, once its connections are up: the host,
//! the device (or the TCP interface), and the parameters in effect. The client's
//! result then holds both sides' (`environment.peer`, `peer_params`).

use std::path::Path;

use crate::backend::{Attachment, Setup, SetupContext};
use crate::environment::{DeviceEnvironment, Environment, InterfaceEnvironment};
use crate::error::Error;
use crate::results::{EnvironmentReport, RunReport};
use crate::session::protocol::{Channel, Message};
use crate::transport::Backend;

/// This side's environment, with what the set-up ran on.
pub fn local(attachment: &Attachment) -> Environment {
    let root = Path::new("/");
    let mut env = Environment::host();
    let device = |name: &str, backend: Backend| {
        let inventory = crate::inventory::collect(Some(name), backend).ok()?;
        inventory.devices.into_iter().next()
    };
    match attachment {
        Attachment::Device { name, port } => {
            env.device = device(name, Backend::Verbs)
                .map(|d| DeviceEnvironment::from_inventory(&d, *port, root));
        }
        Attachment::Adapter(ip) => {
            env.device =
                device(&ip.to_string(), Backend::Nd).map(|d| DeviceEnvironment::from_nd(&d));
        }
        Attachment::Interface(ip) => env.interface = InterfaceEnvironment::for_ip(*ip, root),
    }
    env
}

/// Swaps the two sides' descriptions (the client first) into `report`.
///
/// # Errors
/// The control channel failing, or the peer sending something else.
pub fn exchange<C>(
    ctx: &SetupContext<'_>,
    ch: &mut Channel,
    setup: &Setup<C>,
    report: &mut RunReport,
) -> Result<(), Error> {
    let environment = local(&setup.attachment);
    let mine = Message::Describe { environment: environment.clone(), params: setup.params.clone() };
    let theirs = if ctx.client() {
        ch.send(&mine)?;
        ch.recv("the peer's description")?
    } else {
        let m = ch.recv("the peer's description")?;
        ch.send(&mine)?;
        m
    };
    let Message::Describe { environment: peer, params } = theirs else {
        return Err(Error::refused(format!(
            "control channel: expected describe, got {}",
            theirs.name()
        )));
    };
    report.environment = Some(EnvironmentReport { local: environment, peer: Some(peer.cleaned()) });
    report.peer_params = Some(params);
    Ok(())
}
