//! The loops that hand work on: each incoming transaction to its dialog (in-dialog requests)
//! or to the INVITE path, and every dialog's state changes to the calls' shared state.

use std::sync::Arc;

use rsipstack::dialog::dialog::DialogState;
use rsipstack::sip::prelude::HeadersExt;
use rsipstack::sip::{Header, Method, StatusCode};
use rsipstack::transaction::Transaction;
use tokio::sync::mpsc;

use super::shared::{InboundRouter, Shared};
use crate::call::Core;

pub(super) async fn accept_loop<R: InboundRouter>(
    shared: Arc<Shared<R>>,
    mut incoming: rsipstack::transaction::TransactionReceiver,
) {
    while let Some(tx) = incoming.recv().await {
        let shared = shared.clone();
        tokio::spawn(async move { shared.incoming(tx).await });
    }
}

pub(super) async fn state_loop(core: Arc<Core>, mut states: mpsc::UnboundedReceiver<DialogState>) {
    while let Some(state) = states.recv().await {
        core.on_state(state);
    }
}

impl<R: InboundRouter> Shared<R> {
    /// One incoming transaction: an in-dialog request goes to its dialog (481 without one),
    /// an INVITE to the INVITE path, OPTIONS gets 200.
    async fn incoming(self: Arc<Self>, mut tx: Transaction) {
        let in_dialog = tx
            .original
            .to_header()
            .ok()
            .and_then(|to| to.tag().ok().flatten())
            .is_some();
        if in_dialog {
            match self.core.dialogs.match_dialog(&tx) {
                Some(mut dialog) => {
                    let _ = dialog.handle(&mut tx).await;
                }
                None => {
                    let _ = tx.reply(StatusCode::CallTransactionDoesNotExist).await;
                }
            }
            return;
        }
        match tx.original.method {
            Method::Invite => self.invite(tx).await,
            Method::Options => {
                let allow = Header::Allow("INVITE, ACK, BYE, CANCEL, OPTIONS".into());
                let _ = tx.reply_with(StatusCode::OK, vec![allow], None).await;
            }
            Method::Bye => {
                let _ = tx.reply(StatusCode::CallTransactionDoesNotExist).await;
            }
            _ => {
                let allow = Header::Allow("INVITE, ACK, BYE, CANCEL, OPTIONS".into());
                let _ = tx
                    .reply_with(StatusCode::MethodNotAllowed, vec![allow], None)
                    .await;
            }
        }
    }
}
