//! The round's order and timing, over a server that records what it was asked.

use super::*;
use crate::node::Held;
use crate::registry::{Identity, Lease};

/// A server whose registry answers as told, recording each call in order.
struct Recorder {
    now: i64,
    calls: Vec<String>,
    /// What the next contacts come to: `Err(())` a failure, `Ok(offset)` an answer; a claim
    /// is taken by the first answer when none is held.
    answers: Vec<Result<i64, ()>>,
    lost_session: bool,
    /// The heartbeat finds the claim taken over.
    loses_claim: bool,
    pin_fails: bool,
    /// How many times the round ended its session.
    sessions_ended: u32,
}

impl Recorder {
    fn new(now: i64) -> Recorder {
        Recorder {
            now,
            calls: Vec::new(),
            answers: Vec::new(),
            lost_session: false,
            loses_claim: false,
            pin_fails: false,
            sessions_ended: 0,
        }
    }
}

const LEASE: i64 = 3_000;

const IDENTITY: Identity = Identity {
    token: 7,
    generation: 1,
};

fn lease() -> Lease {
    Lease {
        ends_at: 10_000,
        ceiling: i64::MAX,
    }
}

/// A contact on the recorder's session, answered as told.
struct Scripted<'a>(&'a mut Recorder);

impl contact::Session for Scripted<'_> {
    type Failure = ();

    fn contact(&mut self, state: &mut Memory, _: &Settings) -> Result<(i64, Contact<()>), ()> {
        let recorder = &mut *self.0;
        recorder.calls.push("contact".into());
        let offset = if recorder.answers.is_empty() {
            Ok(0)
        } else {
            recorder.answers.remove(0)
        }?;
        if state.held.is_none() {
            state.taken(1, IDENTITY, lease());
        } else if recorder.loses_claim {
            state.lost();
        }
        Ok((offset, Contact::Idle))
    }
}

impl Server for Recorder {
    type Failure = ();
    type Session<'s> = Scripted<'s>;

    fn monotonic(&mut self) -> i64 {
        self.now
    }

    fn session_lost(&mut self) -> bool {
        std::mem::take(&mut self.lost_session)
    }

    fn session(&mut self, _: i64) -> Result<(Scripted<'_>, bool), ()> {
        Ok((Scripted(self), false))
    }

    fn end_session(&mut self) {
        self.sessions_ended += 1;
    }

    fn pin(&mut self) -> bool {
        self.calls.push("pin".into());
        !self.pin_fails
    }

    fn publish(&mut self, holding: Holding, skewed: bool, fenced: bool, _: i64) {
        let what = match holding {
            Holding::Held { pinned: true, .. } => "held",
            Holding::Held { pinned: false, .. } => "unpinned",
            Holding::Lost => "lost",
            Holding::None { .. } => "none",
        };
        let mode = if fenced { "fenced" } else { "available" };
        let skew = if skewed { " skewed" } else { "" };
        self.calls.push(format!("publish {what} {mode}{skew}"));
    }

    fn shown(&mut self, _: &Contact<()>) {}
}

fn settings(fenced: bool) -> Settings {
    Settings {
        fenced,
        lease_ms: LEASE,
        max_clock_skew_ms: 500,
        configured: Some(1),
        fresh_on_promotion: false,
    }
}

#[test]
fn a_first_round_contacts_pins_then_publishes() {
    let (mut renewer, mut server) = (Renewer::default(), Recorder::new(0));
    let round = renewer.round(&mut server, &settings(false));
    assert_eq!(
        server.calls,
        [
            "publish none available",
            "contact",
            "pin",
            "publish held available"
        ]
    );
    assert!(round.contacted && round.failure.is_none());
    // The first heartbeat is due within a second of the claim.
    assert_eq!(round.sleep_ms, 1_000);
}

#[test]
fn a_claim_not_pinned_is_published_unpinned_and_pinned_at_the_next_round() {
    let (mut renewer, mut server) = (Renewer::default(), Recorder::new(0));
    server.pin_fails = true;
    let round = renewer.round(&mut server, &settings(true));
    assert_eq!(server.calls.last().unwrap(), "publish unpinned fenced");
    assert_eq!(round.sleep_ms, PIN_RETRY_MS);
    server.pin_fails = false;
    server.calls.clear();
    server.now += PIN_RETRY_MS;
    let round = renewer.round(&mut server, &settings(true));
    assert_eq!(server.calls, ["pin", "publish held fenced"]);
    assert!(!round.contacted);
}

#[test]
fn heartbeats_come_at_the_interval_and_failures_are_retried_within_a_second() {
    let (mut renewer, mut server) = (Renewer::default(), Recorder::new(0));
    renewer.round(&mut server, &settings(false));
    let interval = registry::heartbeat_interval_ms(30_000);
    let settings = Settings {
        lease_ms: 30_000,
        ..settings(false)
    };
    server.now = 1_000;
    assert!(renewer.round(&mut server, &settings).contacted);
    // Nothing due before the interval: the renewer sleeps at most a second at a time.
    server.now += interval - 1;
    let round = renewer.round(&mut server, &settings);
    assert!(!round.contacted);
    assert_eq!(round.sleep_ms, PIN_RETRY_MS);
    server.now += 1;
    server.answers.push(Err(()));
    let round = renewer.round(&mut server, &settings);
    assert!(round.contacted && round.failure.is_some());
    assert_eq!(round.sleep_ms, RETRY_MS);
    server.now += RETRY_MS;
    assert!(renewer.round(&mut server, &settings).contacted);
}

#[test]
fn a_switch_of_mode_is_published_before_the_contact_it_makes_at_once() {
    let (mut renewer, mut server) = (Renewer::default(), Recorder::new(0));
    renewer.round(&mut server, &settings(false));
    server.calls.clear();
    server.now += 1;
    server.answers.push(Err(()));
    let round = renewer.round(&mut server, &settings(true));
    assert!(round.contacted);
    assert_eq!(
        server.calls,
        ["publish held fenced", "contact", "publish held fenced"]
    );
}

#[test]
fn a_session_the_registry_ended_or_a_claim_found_lost_is_contacted_again_at_once() {
    let (mut renewer, mut server) = (Renewer::default(), Recorder::new(0));
    renewer.round(&mut server, &settings(false));
    server.now += 1;
    server.lost_session = true;
    assert!(renewer.round(&mut server, &settings(false)).contacted);
    server.now += 1_000;
    server.loses_claim = true;
    let round = renewer.round(&mut server, &settings(false));
    assert_eq!(server.calls.last().unwrap(), "publish lost available");
    assert_eq!(round.sleep_ms, PIN_RETRY_MS);
    server.loses_claim = false;
    server.now += PIN_RETRY_MS;
    assert!(renewer.round(&mut server, &settings(false)).contacted);
    assert!(renewer.state.held.is_some());
}

#[test]
fn a_clock_reading_past_the_limit_refuses_until_one_within_it() {
    let (mut renewer, mut server) = (Renewer::default(), Recorder::new(0));
    server.answers.push(Ok(501));
    renewer.round(&mut server, &settings(false));
    assert_eq!(renewer.skewed(), Some(501));
    assert_eq!(
        server.calls.last().unwrap(),
        "publish held available skewed"
    );
    // A contact that failed leaves the reading as it was.
    server.now += 1_000;
    server.answers.push(Err(()));
    renewer.round(&mut server, &settings(false));
    assert_eq!(renewer.skewed(), Some(501));
    server.now += 1_000;
    server.answers.push(Ok(-500));
    renewer.round(&mut server, &settings(false));
    assert_eq!(renewer.skewed(), None);
    assert_eq!(server.calls.last().unwrap(), "publish held available");
}

#[test]
fn a_restarted_renewer_contacts_at_its_first_round_under_the_claim_it_resumes() {
    let state = Memory {
        held: Some(Held {
            node: 1,
            identity: IDENTITY,
            lease: lease(),
            pinned: true,
        }),
        ..Memory::new()
    };
    let (mut renewer, mut server) = (Renewer::new(state), Recorder::new(5));
    server.answers.push(Err(()));
    let round = renewer.round(&mut server, &settings(false));
    assert!(round.contacted);
    assert_eq!(
        server.calls,
        [
            "publish held available",
            "contact",
            "publish held available"
        ]
    );
}

#[test]
fn a_failed_contact_and_a_lost_claim_end_the_session_and_the_round_returns_what_the_contact_came_to(
) {
    let (mut renewer, mut server) = (Renewer::default(), Recorder::new(0));
    let round = renewer.round(&mut server, &settings(false));
    assert_eq!(round.contact, Some(Contact::Idle));
    assert_eq!(server.sessions_ended, 0);
    server.now += 1_000;
    server.answers.push(Err(()));
    let round = renewer.round(&mut server, &settings(false));
    assert_eq!((round.contact, round.failure), (None, Some(())));
    assert_eq!(server.sessions_ended, 1);
    // A heartbeat that finds the claim lost closes its session: the next claim has its own.
    server.now += 1_000;
    server.loses_claim = true;
    let round = renewer.round(&mut server, &settings(false));
    assert!(round.contacted && round.contact.is_some());
    assert_eq!(server.sessions_ended, 2);
}
