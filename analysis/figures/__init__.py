"""The report's figures (Matplotlib and seaborn, headless).  Imports :mod:`analysis.reading`
and :mod:`analysis.tables` (row order and labels).

==========================  ==============================================================
module                      job
==========================  ==============================================================
``plots.py``                curves, sensitivity, heatmaps, partitions (Fig. 5), Optuna
                            search plots; ``save_figure``
``figure_layout.py``        each study's figure layout (lines, panels, varied parameter)
``representations.py``      Fig. 2: t-SNE of the global and a local model's representations
``feature_examples.py``     a feature-skewed sweep's example training images per party
==========================  ==============================================================
"""
