//! The options of frames written by index, `acquisition_order` and `max_open_shards`,
//! of a recording.
//!
//! The library's JSON configuration takes both keys, but resolves the dimension names
//! of `acquisition_order` against the `dimension_names` of the object they are in: a
//! writer's. A recording's options are at the top level, beside no array, so here the
//! two keys are taken out of a recording's JSON before it is parsed and applied onto
//! its parsed options: axis numbers as they are, dimension names resolved in every
//! array ([`AcquisitionOrder::from_names`]; the arrays share one order, so the names
//! must give the same axes in each).

use serde::Deserialize;
use serde_json::Value;
use zarrstream::config::RecordingConfig;
use zarrstream::{AcquisitionOrder, ArraySpec};

use crate::errors::Failure;
use zarrstream::ErrorKind;

/// `acquisition_order`: storage axis numbers or dimension names, outermost loop first.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
enum OrderKey {
    Axes(Vec<usize>),
    Names(Vec<String>),
}

/// The two keys, taken out of the configuration.
#[derive(Debug, Default)]
pub(crate) struct IndexedKeys {
    order: Option<OrderKey>,
    max_open_shards: Option<usize>,
}

fn invalid(key: &str, message: impl std::fmt::Display) -> Failure {
    Failure::new(
        ErrorKind::InvalidConfig,
        format!("config_json: {key}: {message}"),
    )
}

/// A recording's `config` without `acquisition_order` and `max_open_shards`, and
/// those two. Text that is not a JSON object is returned as it is, for the library's
/// parser to refuse in its words.
pub(crate) fn split(config: &str) -> Result<(String, IndexedKeys), Failure> {
    let Ok(Value::Object(mut top)) = serde_json::from_str::<Value>(config) else {
        return Ok((config.to_owned(), IndexedKeys::default()));
    };
    // The sectioned form has them in `writer`; the deprecated flat one at the top.
    let (order, max) = match top.get_mut("writer") {
        Some(Value::Object(w)) => (w.remove("acquisition_order"), w.remove("max_open_shards")),
        _ => (
            top.remove("acquisition_order"),
            top.remove("max_open_shards"),
        ),
    };
    if order.is_none() && max.is_none() {
        return Ok((config.to_owned(), IndexedKeys::default()));
    }
    let order = match order {
        None | Some(Value::Null) => None,
        Some(v) => Some(serde_json::from_value::<OrderKey>(v.clone()).map_err(|_| {
            invalid(
                "acquisition_order",
                format!("{v} is not a list of axis numbers or of dimension names"),
            )
        })?),
    };
    let max_open_shards = match max {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| invalid("max_open_shards", format!("{v} is not a count")))?,
        ),
    };
    let text = serde_json::to_string(&Value::Object(top))
        .map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))?;
    Ok((
        text,
        IndexedKeys {
            order,
            max_open_shards,
        },
    ))
}

/// The leading dimension names of `spec` (all but y, x), if it has names.
fn leading_names(spec: &ArraySpec) -> Option<&[String]> {
    let names = spec.dimension_names()?;
    names.get(..names.len().saturating_sub(2))
}

impl IndexedKeys {
    /// The acquisition order for arrays `specs` (a recording's options apply to every
    /// array, so names must resolve to the same axes in each).
    fn order(&self, specs: &[&ArraySpec]) -> Result<Option<AcquisitionOrder>, Failure> {
        let names = match &self.order {
            None => return Ok(None),
            Some(OrderKey::Axes(axes)) => return Ok(Some(AcquisitionOrder::new(axes.clone()))),
            Some(OrderKey::Names(names)) => names,
        };
        let mut found: Option<AcquisitionOrder> = None;
        for spec in specs {
            let Some(dims) = leading_names(spec) else {
                return Err(Failure::new(
                    ErrorKind::InvalidConfig,
                    format!(
                        "invalid acquisition order: {names:?} names dimensions but the array \
                         has no dimension_names (give them, or the order as axis numbers)"
                    ),
                ));
            };
            let order = AcquisitionOrder::from_names(names, dims)?;
            match &found {
                Some(prev) if prev != &order => {
                    return Err(Failure::new(
                        ErrorKind::InvalidConfig,
                        format!(
                            "invalid acquisition order: {names:?} is {:?} in one array and \
                             {:?} in another; the recording's arrays share one order",
                            prev.axes(),
                            order.axes()
                        ),
                    ));
                }
                _ => found = Some(order),
            }
        }
        Ok(found)
    }

    /// Applies the keys onto a recording's shared options, for every array (a plate's
    /// field image).
    pub(crate) fn apply_recording(&self, config: &mut RecordingConfig) -> Result<(), Failure> {
        let order = match &config.plate {
            Some(p) => self.order(&[&p.spec])?,
            None => self.order(&config.arrays.iter().map(|a| &a.spec).collect::<Vec<_>>())?,
        };
        if let Some(order) = order {
            config.options.acquisition_order = Some(order);
        }
        if let Some(n) = self.max_open_shards {
            config.options.max_open_shards = n;
        }
        Ok(())
    }
}
